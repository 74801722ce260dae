// Shared by the pages: the CSRF token, JSON requests, the header's operator and logout.
"use strict";

const hsearch = (() => {
  const CSRF_COOKIE = "hsearch_ops_csrf";

  function csrfToken() {
    for (const part of document.cookie.split(";")) {
      const [name, ...rest] = part.trim().split("=");
      if (name === CSRF_COOKIE) return decodeURIComponent(rest.join("="));
    }
    return "";
  }

  // A request of the pages' JSON API; a 401 (no session) sends the browser to log in.
  async function request(method, url, { body, headers } = {}) {
    const init = { method, credentials: "same-origin", headers: { Accept: "application/json", ...headers } };
    if (method !== "GET") init.headers["X-CSRF-Token"] = csrfToken();
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(url, init);
    if (resp.status === 401 && !url.startsWith("/ops/login")) {
      window.location.assign("/ops/login");
      throw new Error("session expired");
    }
    const text = await resp.text();
    const data = text ? JSON.parse(text) : null;
    if (!resp.ok) {
      const err = new Error(data && data.detail ? `${data.error}: ${data.detail}` : `HTTP ${resp.status}`);
      err.status = resp.status;
      throw err;
    }
    return data;
  }

  function text(el, value) {
    el.textContent = value;
    return el;
  }

  function el(tag, content, attrs = {}) {
    const node = document.createElement(tag);
    if (content !== undefined && content !== null) node.textContent = String(content);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    return node;
  }

  async function header() {
    const who = document.getElementById("operator");
    const logout = document.getElementById("logout");
    if (!who || !logout) return;
    const session = await request("GET", "/ops/api/session");
    text(who, `operator ${session.operator}`);
    logout.addEventListener("click", async () => {
      await request("POST", "/ops/logout");
      window.location.assign("/ops/login");
    });
  }

  return { csrfToken, request, text, el, header };
})();
