// A small Markdown renderer for model output that builds DOM nodes only:
// every piece of model text goes in through textContent / createTextNode,
// never innerHTML, so output such as "<script>" or "<img onerror=...>" shows
// as text and can never become an element. Supported: fenced code blocks,
// headings, bullet and numbered lists, block quotes, paragraphs, inline code,
// **bold**, *italic* and [links](https://...) (http, https and mailto only).
"use strict";

(function () {
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function safeHref(url) {
    try {
      const u = new URL(url, window.location.href);
      if (u.protocol === "http:" || u.protocol === "https:" || u.protocol === "mailto:") return u.href;
    } catch (e) { /* not a URL: shown as text */ }
    return null;
  }

  // Inline spans of one line of text, appended to `parent`.
  function renderInline(text, parent) {
    // Order matters: code spans first (their content is literal).
    const pattern = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)/g;
    let last = 0;
    let m;
    while ((m = pattern.exec(text)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      if (m[1]) {
        parent.appendChild(el("code", "inline", m[2]));
      } else if (m[3] !== undefined) {
        const b = el("strong");
        renderInline(m[3], b);
        parent.appendChild(b);
      } else if (m[4] !== undefined) {
        const i = el("em");
        renderInline(m[4], i);
        parent.appendChild(i);
      } else {
        const href = safeHref(m[6]);
        if (href) {
          const a = el("a", null, m[5]);
          a.setAttribute("href", href);
          a.setAttribute("target", "_blank");
          a.setAttribute("rel", "noopener noreferrer nofollow");
          parent.appendChild(a);
        } else {
          parent.appendChild(document.createTextNode(m[0]));
        }
      }
      last = pattern.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function appendLines(lines, parent) {
    lines.forEach((line, k) => {
      if (k > 0) parent.appendChild(el("br"));
      renderInline(line, parent);
    });
  }

  // Renders `text` into a new <div class="md">. An unclosed code fence (a
  // reply still streaming) is shown as a code block so far.
  function renderMarkdown(text) {
    const root = el("div", "md");
    const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    let para = [];
    const flush = () => {
      if (para.length) {
        const p = el("p");
        appendLines(para, p);
        root.appendChild(p);
        para = [];
      }
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = /^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$/.exec(line);
      if (fence) {
        flush();
        const body = [];
        i++;
        while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
        i++;  // the closing fence
        const pre = el("pre", "code-block");
        if (fence[2]) pre.appendChild(el("span", "lang", fence[2]));
        const copy = el("button", "copy", "copy");
        copy.type = "button";
        const code = el("code", null, body.join("\n"));
        copy.addEventListener("click", () => navigator.clipboard && navigator.clipboard.writeText(code.textContent));
        pre.appendChild(copy);
        pre.appendChild(code);
        root.appendChild(pre);
        continue;
      }
      const heading = /^(#{1,6})\s+(.*)$/.exec(line);
      if (heading) {
        flush();
        const h = el("h" + Math.min(6, heading[1].length + 2));
        renderInline(heading[2], h);
        root.appendChild(h);
        i++;
        continue;
      }
      const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(line);
      if (item) {
        flush();
        const ordered = /\d/.test(item[1]);
        const list = el(ordered ? "ol" : "ul");
        while (i < lines.length) {
          const it = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(lines[i]);
          if (!it || /\d/.test(it[1]) !== ordered) break;
          const li = el("li");
          renderInline(it[2], li);
          list.appendChild(li);
          i++;
        }
        root.appendChild(list);
        continue;
      }
      if (/^\s*>/.test(line)) {
        flush();
        const quote = [];
        while (i < lines.length && /^\s*>/.test(lines[i])) quote.push(lines[i++].replace(/^\s*>\s?/, ""));
        const bq = el("blockquote");
        appendLines(quote, bq);
        root.appendChild(bq);
        continue;
      }
      if (line.trim() === "") flush();
      else para.push(line);
      i++;
    }
    flush();
    return root;
  }

  window.PagellmMarkdown = { renderMarkdown };
})();
