"""The built-in chat page (GET /) in a real browser: headless Chromium driven
by selenium against `pagellm serve` on a loopback port. It sends a message
and sees the reply stream in, stops a long reply, regenerates, keeps the
conversation across a reload, asks for the API key, shows the server status,
and renders model output with markup in it as text. A screenshot goes to
build/test-output/ (the path is printed). Skipped, with the reason, when
Chromium, its driver or selenium is missing (scripts/setup.sh installs them).
"""
import json
import pathlib
import shutil
import time

import pytest
import requests

from conftest import ROOT

OUTPUT = ROOT / "build" / "test-output"


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh installs "
                    "them)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (scripts/setup.sh installs it)")
    return chromium, driver


@pytest.fixture
def browser():
    chromium, driver_path = find_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,900", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    # An explicit driver: selenium must not go looking for one on the network.
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=opts)
    driver.set_script_timeout(30)
    yield driver
    driver.quit()


def wait_for(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def screenshot(driver, name):
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / name
    driver.save_screenshot(str(path))
    print(f"\nweb UI screenshot: {path}")
    return path


def assistant_messages(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('#messages .msg.assistant')).map(m => ({"
        "text: m.querySelector('.content').textContent,"
        "streaming: m.classList.contains('streaming')}));")


def send(driver, text):
    from selenium.webdriver.common.by import By
    box = driver.find_element(By.ID, "prompt")
    box.clear()
    box.send_keys(text)
    driver.find_element(By.ID, "send").click()


def set_field(driver, element_id, value):
    driver.execute_script(
        "const e = document.getElementById(arguments[0]); e.value = arguments[1];"
        "e.dispatchEvent(new Event('change'));", element_id, value)


def test_page_is_served_and_can_be_turned_off(start_server):
    srv = start_server()
    r = requests.get(srv.url + "/", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    assert "script-src 'self'" in r.headers["Content-Security-Policy"]
    # Nothing from elsewhere: every script and style is the server's own.
    assert "http://" not in r.text and "https://" not in r.text
    for asset in ("app.js", "markdown.js", "app.css"):
        a = requests.get(f"{srv.url}/ui/{asset}", timeout=30)
        assert a.status_code == 200 and a.text, asset
        for sink in (".innerHTML", "outerHTML", "insertAdjacentHTML", "document.write"):
            assert sink not in a.text, (asset, sink)
    assert requests.get(srv.url + "/ui/nope.js", timeout=30).status_code == 404
    off = start_server("--no-webui")
    r = requests.get(off.url + "/", timeout=30)
    assert r.status_code == 404
    assert r.json()["error"]["message"] == "Invalid URL (GET /)"


def test_chat_with_api_key_status_regenerate_and_history(start_server, browser):
    from selenium.webdriver.common.by import By
    srv = start_server("--api-key", "pw", "--alias", "stories")
    browser.get(srv.url + "/")
    wait_for(lambda: browser.find_element(By.ID, "status-model").text == "(API key needed)",
             what="the status panel to ask for the key")
    set_field(browser, "max-tokens", "40")
    # Without the key the server says 401 and the page asks for it.
    send(browser, "Hello there")
    wait_for(lambda: "needed" in browser.find_element(By.ID, "api-key").get_attribute("class"),
             what="the key field to be marked")
    assert "API key" in browser.find_element(By.ID, "error").text
    assert assistant_messages(browser) == []
    set_field(browser, "api-key", "pw")
    browser.find_element(By.ID, "regenerate").click()  # re-sends the unanswered message
    msgs = wait_for(lambda: [m for m in assistant_messages(browser) if not m["streaming"]
                             and m["text"].strip()] or None, what="a reply")
    first = msgs[0]["text"]
    assert "tokens/s" in first
    # The status panel: model, context, KV cache.
    wait_for(lambda: browser.find_element(By.ID, "status-model").text.startswith("stories"),
             what="the model in the status panel")
    assert browser.find_element(By.ID, "status-context").text.endswith("tokens")
    wait_for(lambda: "blocks" in browser.find_element(By.ID, "status-kv").text,
             what="the KV cache in the status panel")
    # Regenerate replaces the last reply.
    browser.find_element(By.ID, "regenerate").click()
    wait_for(lambda: len(assistant_messages(browser)) == 1 and
             not assistant_messages(browser)[0]["streaming"] and
             "tokens/s" in assistant_messages(browser)[0]["text"], what="the new reply")
    user_msgs = browser.find_elements(By.CSS_SELECTOR, "#messages .msg.user")
    assert [u.text.split("\n")[-1] for u in user_msgs] == ["Hello there"]
    # Kept in the browser: a reload shows the conversation again.
    stored = json.loads(browser.execute_script(
        "return localStorage.getItem('pagellm.conversations')"))
    assert stored[0]["messages"][0] == {"role": "user", "content": "Hello there"}
    browser.refresh()
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, "#messages .msg")) == 2,
             what="the conversation after a reload")
    assert browser.find_element(By.CSS_SELECTOR, "#conversations li.current").text.startswith(
        "Hello there")
    screenshot(browser, "web_ui_chat.png")


def test_reply_streams_in_and_stop_ends_it(start_server, browser, slow_model):
    from selenium.webdriver.common.by import By
    srv = start_server("--alias", "slow", model=slow_model)
    browser.get(srv.url + "/")
    wait_for(lambda: browser.execute_script("return !!window.PagellmUI"), what="the page script")
    # A random model may sample end-of-text any time; the reply must still be
    # running when the test presses stop, so its requests ignore it.
    browser.execute_script("""
      const real = window.fetch;
      window.fetch = (url, opts) => {
        if (String(url).endsWith('/v1/chat/completions') && opts && opts.body) {
          const body = JSON.parse(opts.body);
          body.ignore_eos = true;
          opts = Object.assign({}, opts, {body: JSON.stringify(body)});
        }
        return real(url, opts);
      };""")
    set_field(browser, "max-tokens", "3000")
    send(browser, "Tell me a very long story.")
    # Text arrives while the reply is still streaming.
    wait_for(lambda: any(m["streaming"] and len(m["text"]) > 10
                     for m in assistant_messages(browser)), what="streamed text")
    assert browser.find_element(By.ID, "stop").is_enabled()
    assert not browser.find_element(By.ID, "send").is_enabled()
    browser.find_element(By.ID, "stop").click()
    msgs = wait_for(lambda: [m for m in assistant_messages(browser) if not m["streaming"]] or None,
                    timeout=10, what="the reply to stop")
    assert "(stopped)" in msgs[0]["text"]
    stopped_at = msgs[0]["text"]
    time.sleep(0.5)
    assert assistant_messages(browser)[0]["text"] == stopped_at  # nothing more came
    # The server saw the client go and freed the request.
    srv.wait_access(lambda e: e.get("path") == "/v1/chat/completions" and
                    e.get("error") == "client disconnected")
    srv.wait_metric("pagellm_requests_running", lambda v: v == 0)
    assert browser.find_element(By.ID, "send").is_enabled()


def test_model_output_is_shown_as_text(start_server, browser):
    from selenium.webdriver.common.by import By
    srv = start_server()
    browser.get(srv.url + "/")
    wait_for(lambda: browser.execute_script("return !!window.PagellmUI"), what="the page script")
    # A stream whose text is markup: the page's fetch of the completion is
    # answered by a fake stream, so the whole streaming path renders it.
    browser.execute_script("""
      const real = window.fetch;
      window.__pieces = [
        "Look: <script>window.__xss = 1</script>",
        " and <img src=x onerror=\\"window.__xss = 2\\"> and <b>bold?</b>\\n\\n",
        "```html\\n<script>window.__xss = 3</script>\\n```\\n",
        "[link](javascript:window.__xss=4) **done**"];
      window.fetch = (url, opts) => {
        if (!String(url).includes('/v1/chat/completions')) return real(url, opts);
        const enc = new TextEncoder();
        const body = new ReadableStream({start(c) {
          for (const p of window.__pieces)
            c.enqueue(enc.encode('data: ' + JSON.stringify(
              {choices: [{index: 0, delta: {content: p}, finish_reason: null}]}) + '\\n\\n'));
          c.enqueue(enc.encode('data: [DONE]\\n\\n'));
          c.close();
        }});
        return Promise.resolve(new Response(body, {status: 200,
          headers: {'Content-Type': 'text/event-stream'}}));
      };""")
    send(browser, "Say something with markup")
    wait_for(lambda: any(not m["streaming"] and "done" in m["text"]
                         for m in assistant_messages(browser)), what="the fake reply")
    found = browser.execute_script("""
      const box = document.querySelector('#messages .msg.assistant .content');
      return {
        xss: window.__xss === undefined ? null : window.__xss,
        elements: box.querySelectorAll('script, img, b, iframe, [onerror]').length,
        links: Array.from(box.querySelectorAll('a')).map(a => a.getAttribute('href')),
        code: Array.from(box.querySelectorAll('pre code')).map(c => c.textContent),
        strong: Array.from(box.querySelectorAll('strong')).map(s => s.textContent),
        text: box.textContent};""")
    assert found["xss"] is None
    assert found["elements"] == 0
    assert found["links"] == []  # a javascript: link stays text
    assert found["code"] == ["<script>window.__xss = 3</script>"]
    assert found["strong"] == ["done"]
    text = browser.find_element(By.CSS_SELECTOR, "#messages .msg.assistant .content").text
    assert "<script>window.__xss = 1</script>" in text
    assert '<img src=x onerror="window.__xss = 2">' in text
    assert "<b>bold?</b>" in text
    # The renderer alone, as the page exposes it.
    direct = browser.execute_script("""
      const el = window.PagellmUI.renderMarkdown(
        '<script>alert(1)</script><img src=x onerror=alert(1)>');
      document.body.appendChild(el);
      return {n: el.querySelectorAll('*').length - el.querySelectorAll('p, br').length,
              text: el.textContent};""")
    assert direct["n"] == 0
    assert direct["text"] == "<script>alert(1)</script><img src=x onerror=alert(1)>"
    screenshot(browser, "web_ui_markup_as_text.png")
