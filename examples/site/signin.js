// The example sign-in page: configures Google's redirect-mode button, or sends the browser to the development stand-in.
"use strict";

(function () {
  const config = window.tokensignin;
  const status = document.getElementById("status");
  if (!config || !config.clientId) {
    status.textContent = "This site is not configured: /example/config.js is missing (scripts/example-site writes it).";
    return;
  }
  const loginURI = new URL("/tokensignin", window.location.origin).href;
  if (config.standIn) {
    useStandIn(config.standIn, config.clientId, loginURI);
  } else {
    useGoogle(config.clientId, loginURI);
  }

  function useGoogle(clientId, loginURI) {
    const onload = document.getElementById("g_id_onload");
    onload.setAttribute("data-client_id", clientId);
    onload.setAttribute("data-login_uri", loginURI);
    const library = document.createElement("script");
    library.src = "https://accounts.google.com/gsi/client";
    library.async = true;
    document.head.append(library);
  }

  // What Google's library does in redirect mode, done by hand: a fresh double-submit token in a cookie on this
  // site and the same value in the URL to Google's page, which posts it back with the credential.
  function useStandIn(standIn, clientId, loginURI) {
    document.querySelector(".g_id_signin").hidden = true;
    document.getElementById("development").hidden = false;
    document.getElementById("standin-signin").addEventListener("click", () => {
      const csrf = randomToken();
      // SameSite=None: the cookie must reach a POST that another site's page sends; Lax or Strict ones are
      // withheld from it (docs/http.md, "The web flow in a browser").
      document.cookie = `g_csrf_token=${csrf}; Path=/; Secure; SameSite=None`;
      const target = new URL(standIn);
      target.searchParams.set("client_id", clientId);
      target.searchParams.set("login_uri", loginURI);
      target.searchParams.set("ux_mode", "redirect");
      target.searchParams.set("g_csrf_token", csrf);
      window.location.assign(target.href);
    });
  }

  // 16 random bytes, hex: cookie-safe and URL-safe.
  function randomToken() {
    const bytes = new Uint8Array(16);
    crypto.getRandomValues(bytes);
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }
})();
