// The development stand-in for Google's page: checks the request as Google would, then posts the chosen account's token.
"use strict";

(function () {
  const status = document.getElementById("status");
  const standIn = window.standIn;
  const query = new URLSearchParams(window.location.search);
  const clientId = query.get("client_id");
  const loginURI = query.get("login_uri");
  const csrf = query.get("g_csrf_token");

  // Google refuses an unknown client and a login_uri that is not one of the client's redirect URIs.
  if (!standIn) return refuse("accounts.js is missing (scripts/example-site writes it)");
  if (clientId !== standIn.clientId) return refuse(`unknown client_id ${clientId}`);
  if (!standIn.loginURIs.includes(loginURI)) return refuse(`login_uri ${loginURI} is not a redirect URI of this client`);
  if (!csrf) return refuse("no g_csrf_token");

  document.getElementById("site").textContent = new URL(loginURI).host;
  const list = document.getElementById("accounts");
  for (const account of standIn.accounts) {
    const item = document.createElement("li");
    const choose = document.createElement("button");
    choose.type = "button";
    choose.id = `account-${account.sub}`;
    const name = document.createElement("strong");
    name.textContent = account.name;
    choose.append(name, document.createElement("br"), account.email);
    choose.addEventListener("click", () => post(account));
    item.append(choose);
    list.append(item);
  }

  // A top-level form POST to the relying party, cross-site, with the fields Google's page sends.
  function post(account) {
    const form = document.createElement("form");
    form.method = "POST";
    form.action = loginURI;
    for (const [name, value] of [["credential", account.credential], ["g_csrf_token", csrf], ["select_by", "btn"]]) {
      const field = document.createElement("input");
      field.type = "hidden";
      field.name = name;
      field.value = value;
      form.append(field);
    }
    document.body.append(form);
    form.submit();
  }

  function refuse(reason) {
    status.textContent = `Refused: ${reason}.`;
  }
})();
