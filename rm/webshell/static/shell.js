// The web shell's page: xterm.js on the WebSocket of protocols/webshell.
// A frame is one binary message: a type byte, then its payload.
(function () {
  "use strict";
  const STDIN = 0x01, RESIZE = 0x02, STDOUT = 0x10, STDERR = 0x11, EXIT = 0x12;
  const SUBPROTOCOL = "v1.shell.knit.io";
  const MAX_DATA = 32 << 10;

  const el = document.getElementById("terminal");
  const status = document.getElementById("status");
  const term = new Terminal({ cursorBlink: true, scrollback: 5000, convertEol: false });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open(el);
  fit.fit();
  // Tests and users read the screen's text from here, a line the
  // terminal wrapped joined back into one.
  window.knitShell = { term: term, text: function () {
    const b = term.buffer.active, lines = [];
    for (let i = 0; i < b.length; i++) {
      const line = b.getLine(i), s = line.translateToString(true);
      if (line.isWrapped && lines.length > 0) { lines[lines.length - 1] += s; } else { lines.push(s); }
    }
    return lines.join("\n");
  } };

  const url = new URL(location.pathname.replace(/\/$/, "") + "/ws", location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const user = el.dataset.user;
  if (user) { url.searchParams.set("user.name", user); }
  url.searchParams.set("tty", "true");
  url.searchParams.set("cols", String(term.cols));
  url.searchParams.set("rows", String(term.rows));

  const ws = new WebSocket(url.toString(), [SUBPROTOCOL]);
  ws.binaryType = "arraybuffer";
  const enc = new TextEncoder();
  const dec = new TextDecoder();
  let exited = false;

  function send(type, payload) {
    if (ws.readyState !== WebSocket.OPEN) { return; }
    const b = new Uint8Array(1 + payload.length);
    b[0] = type;
    b.set(payload, 1);
    ws.send(b);
  }
  function sendInput(s) {
    const bytes = enc.encode(s);
    for (let i = 0; i < bytes.length; i += MAX_DATA) { send(STDIN, bytes.subarray(i, i + MAX_DATA)); }
  }
  function sendSize() {
    const p = new Uint8Array(4);
    const v = new DataView(p.buffer);
    v.setUint16(0, term.cols);
    v.setUint16(2, term.rows);
    send(RESIZE, p);
  }

  ws.onopen = function () { status.textContent = "connected"; term.focus(); };
  ws.onmessage = function (ev) {
    const b = new Uint8Array(ev.data);
    if (b.length === 0) { return; }
    const p = b.subarray(1);
    switch (b[0]) {
      case STDOUT: case STDERR: term.write(p); break;
      case EXIT: {
        exited = true;
        const code = new DataView(p.buffer, p.byteOffset, 4).getInt32(0);
        const reason = dec.decode(p.subarray(4));
        status.textContent = "exited " + code + (reason ? ": " + reason : "");
        term.write("\r\n[" + status.textContent + "]\r\n");
        break;
      }
    }
  };
  ws.onclose = function (ev) {
    if (!exited) {
      status.textContent = "closed" + (ev.reason ? ": " + ev.reason : "") + (ev.code === 1006 ? " (refused or unreachable)" : "");
    }
  };
  term.onData(sendInput);
  term.onBinary(function (s) {
    const b = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) { b[i] = s.charCodeAt(i) & 0xff; }
    send(STDIN, b);
  });
  term.onResize(sendSize);
  window.addEventListener("resize", function () { fit.fit(); });
  // Leaving the page ends the session at once, cached page or not.
  window.addEventListener("pagehide", function () { ws.close(1000, "page closed"); });
})();
