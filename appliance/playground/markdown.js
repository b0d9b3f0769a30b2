// A small Markdown renderer for model output. It builds DOM nodes and puts every piece of text in
// with textContent / createTextNode, never innerHTML: a model that writes <script> or <img onerror>
// shows those characters as text. Supported: fenced code blocks (an unclosed fence while an answer
// streams is code up to the end), headings, lists, block quotes, rules, paragraphs, and inline
// code, bold, italic and http(s) links.

const FENCE = /^\s*(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*(\d{1,9})[.)]\s+(.*)$/;
const QUOTE = /^\s*>\s?(.*)$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;

function element(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

function codeBlock(lines, language, onCopy) {
  const wrapper = element("div", "code-block");
  const bar = element("div", "code-bar");
  const label = element("span");
  label.textContent = language || "code";
  const copy = element("button", "copy-code");
  copy.type = "button";
  copy.textContent = "Copy";
  const text = lines.join("\n");
  copy.addEventListener("click", () => onCopy(text, copy));
  bar.append(label, copy);
  const pre = element("pre");
  const code = element("code");
  code.textContent = text;
  pre.append(code);
  wrapper.append(bar, pre);
  return wrapper;
}

const INLINE = [
  { kind: "code", pattern: /`([^`\n]+)`/ },
  { kind: "strong", pattern: /\*\*(?=\S)([\s\S]*?\S)\*\*/ },
  { kind: "strong", pattern: /__(?=\S)([\s\S]*?\S)__/ },
  { kind: "em", pattern: /\*(?=[^\s*])([^*]*?[^\s*])\*/ },
  { kind: "em", pattern: /(?<![\w])_(?=\S)([^_]*?\S)_(?![\w])/ },
  { kind: "link", pattern: /\[([^\]\n]+)\]\((\S+?)\)/ },
];

function safeHref(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "http:" || parsed.protocol === "https:" ? parsed.href : null;
  } catch {
    return null;
  }
}

// Appends `text` to `parent`, with inline markup turned into elements (text only as text nodes).
export function appendInline(parent, text) {
  while (text) {
    let best = null;
    for (const rule of INLINE) {
      const match = rule.pattern.exec(text);
      if (match && (best === null || match.index < best.match.index)) best = { rule, match };
    }
    if (best === null) {
      parent.append(document.createTextNode(text));
      return;
    }
    const { rule, match } = best;
    if (match.index > 0) parent.append(document.createTextNode(text.slice(0, match.index)));
    if (rule.kind === "code") {
      const code = element("code");
      code.textContent = match[1];
      parent.append(code);
    } else if (rule.kind === "link") {
      const href = safeHref(match[2]);
      if (href) {
        const link = element("a");
        link.href = href;
        link.rel = "noopener noreferrer nofollow";
        link.target = "_blank";
        appendInline(link, match[1]);
        parent.append(link);
      } else {
        parent.append(document.createTextNode(match[0]));
      }
    } else {
      const node = element(rule.kind);
      appendInline(node, match[1]);
      parent.append(node);
    }
    text = text.slice(match.index + match[0].length);
  }
}

function paragraph(lines) {
  const node = element("p");
  lines.forEach((line, index) => {
    if (index > 0) node.append(element("br"));
    appendInline(node, line);
  });
  return node;
}

// A DocumentFragment showing `source` (Markdown). `onCopy(text, button)` copies a code block.
export function renderMarkdown(source, onCopy = () => {}) {
  const fragment = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let index = 0;
  let pending = [];
  const flush = () => {
    if (pending.length) fragment.append(paragraph(pending));
    pending = [];
  };
  while (index < lines.length) {
    const line = lines[index];
    const fence = FENCE.exec(line);
    if (fence) {
      flush();
      const code = [];
      index += 1;
      while (index < lines.length && !lines[index].trim().startsWith(fence[1])) code.push(lines[index++]);
      index += 1;
      fragment.append(codeBlock(code, fence[2], onCopy));
      continue;
    }
    if (!line.trim()) {
      flush();
      index += 1;
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      flush();
      const node = element(`h${Math.min(heading[1].length + 2, 6)}`);
      appendInline(node, heading[2]);
      fragment.append(node);
      index += 1;
      continue;
    }
    if (RULE.test(line)) {
      flush();
      fragment.append(element("hr"));
      index += 1;
      continue;
    }
    if (QUOTE.test(line)) {
      flush();
      const quoted = [];
      while (index < lines.length && QUOTE.test(lines[index])) quoted.push(QUOTE.exec(lines[index++])[1]);
      const node = element("blockquote");
      node.append(renderMarkdown(quoted.join("\n"), onCopy));
      fragment.append(node);
      continue;
    }
    const listPattern = BULLET.test(line) ? BULLET : NUMBERED.test(line) ? NUMBERED : null;
    if (listPattern) {
      flush();
      const list = element(listPattern === BULLET ? "ul" : "ol");
      if (listPattern === NUMBERED) list.start = Number(NUMBERED.exec(line)[1]);
      while (index < lines.length && listPattern.test(lines[index])) {
        const match = listPattern.exec(lines[index++]);
        const item = element("li");
        appendInline(item, match[match.length - 1]);
        list.append(item);
      }
      fragment.append(list);
      continue;
    }
    pending.push(line);
    index += 1;
  }
  flush();
  return fragment;
}
