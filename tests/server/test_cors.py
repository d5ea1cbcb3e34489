"""CORS: off by default; --cors-origin allows listed origins (or '*'), answers
pre-flights on the API routes, and gives unlisted origins no allow header."""
import requests

ORIGIN = "http://app.example:3000"
CORS_HEADERS = ("Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
                "Access-Control-Allow-Headers", "Access-Control-Max-Age")


def preflight(url, path, origin=ORIGIN, method="POST",
              headers="authorization, content-type, x-api-key, anthropic-version"):
    return requests.options(url + path, timeout=30, headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": headers})


def test_off_by_default(server):
    r = requests.get(server.url + "/v1/models", headers={"Origin": ORIGIN}, timeout=30)
    assert r.status_code == 200
    assert not any(h.lower().startswith("access-control-") for h in r.headers)
    r = preflight(server.url, "/v1/chat/completions")
    assert not any(h.lower().startswith("access-control-") for h in r.headers)
    assert r.status_code >= 400


def test_listed_origin(start_server):
    srv = start_server("--cors-origin", ORIGIN, "--cors-origin", "http://other.example",
                       "--api-key", "k")
    for path in ("/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/models"):
        r = preflight(srv.url, path)
        assert r.status_code == 204, path  # no key needed for the pre-flight
        assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
        assert "POST" in r.headers["Access-Control-Allow-Methods"]
        allowed = {h.strip().lower() for h in r.headers["Access-Control-Allow-Headers"].split(",")}
        assert {"authorization", "content-type", "x-api-key", "anthropic-version"} <= allowed
        assert int(r.headers["Access-Control-Max-Age"]) > 0
        assert r.headers["Vary"] == "Origin"
    # Actual requests carry the allow header, errors (401) included.
    r = requests.get(srv.url + "/v1/models", headers={"Origin": ORIGIN}, timeout=30)
    assert r.status_code == 401
    assert r.headers["Access-Control-Allow-Origin"] == ORIGIN
    r = requests.post(srv.url + "/v1/chat/completions", timeout=60,
                      headers={"Origin": "http://other.example", "Authorization": "Bearer k"},
                      json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2,
                            "stream": True})
    assert r.status_code == 200
    assert r.headers["Access-Control-Allow-Origin"] == "http://other.example"
    assert "data: [DONE]" in r.text
    # An origin not in the list gets no allow header.
    r = preflight(srv.url, "/v1/chat/completions", origin="http://evil.example")
    assert "Access-Control-Allow-Origin" not in r.headers
    r = requests.get(srv.url + "/v1/models", timeout=30,
                     headers={"Origin": "http://evil.example", "Authorization": "Bearer k"})
    assert r.status_code == 200
    assert "Access-Control-Allow-Origin" not in r.headers
    # No Origin (not a browser): nothing changes.
    r = requests.get(srv.url + "/health", timeout=30)
    assert "Access-Control-Allow-Origin" not in r.headers


def test_any_origin(start_server):
    srv = start_server("--cors-origin", "*")
    r = preflight(srv.url, "/v1/messages", origin="http://anything.example")
    assert r.status_code == 204
    assert r.headers["Access-Control-Allow-Origin"] == "*"
    r = requests.get(srv.url + "/v1/models", headers={"Origin": "http://x.example"}, timeout=30)
    assert r.headers["Access-Control-Allow-Origin"] == "*"


def test_bad_origin_is_refused(pagellm_bin):
    import subprocess
    from conftest import STORIES
    out = subprocess.run([pagellm_bin, "serve", "-m", str(STORIES), "--port", "0",
                          "--cors-origin", "http://a.example/path"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "is not an origin" in out.stderr
