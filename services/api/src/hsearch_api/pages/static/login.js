"use strict";

document.getElementById("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = document.getElementById("key");
  const error = document.getElementById("login-error");
  hsearch.text(error, "");
  try {
    // POSTed in the body, never in the URL; the answer sets the session cookie.
    await hsearch.request("POST", "/ops/login", { body: { key: input.value.trim() } });
    input.value = "";
    window.location.assign("/ops");
  } catch (err) {
    hsearch.text(error, err.message);
  }
});
