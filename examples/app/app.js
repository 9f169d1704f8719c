// The example's protected page: who is signed in (GET /auth/session), their sessions (GET /sessions), revoke, sign out.
"use strict";

(function () {
  const status = document.getElementById("status");
  // The devices list is paged (docs/http.md); this page shows at most this many pages of it.
  const maxPages = 10;

  document.getElementById("signout").addEventListener("click", signOut);
  refresh();

  async function refresh() {
    try {
      const me = await call("GET", "/auth/session");
      if (!me) return;
      showIdentity(me);
      const sessions = [];
      let after = null;
      for (let page = 0; page < maxPages; page++) {
        const list = await call("GET", after === null ? "/sessions" : `/sessions?after=${after}`);
        if (!list) return;
        sessions.push(...list.sessions);
        if (list.next === null) break;
        after = list.next;
      }
      showSessions(sessions);
    } catch (error) {
      status.textContent = error.message;
    }
  }

  // Same-origin requests carry the session cookie; a change carries this page's Origin, which the responder checks.
  async function call(method, path) {
    const answer = await fetch(path, { method, credentials: "same-origin", cache: "no-store" });
    if (answer.status === 401) {
      window.location.assign("/signin.html");
      return null;
    }
    if (answer.status === 204) return {};
    const body = await answer.json().catch(() => ({}));
    if (!answer.ok) throw new Error(`${method} ${path}: ${answer.status} ${body.error || ""}`.trim());
    return body;
  }

  function showIdentity(me) {
    document.getElementById("greeting").textContent = `Signed in as ${me.email || me.sub}`;
    document.getElementById("user-id").textContent = String(me.user_id);
    document.getElementById("user-sub").textContent = me.sub;
    document.getElementById("user-email").textContent = me.email ? me.email : "(no verified address)";
    document.getElementById("session-id").textContent = String(me.session_id);
  }

  // textContent only: user agents and addresses are whatever a client sent.
  function showSessions(sessions) {
    const body = document.getElementById("sessions");
    body.replaceChildren();
    for (const session of sessions) {
      const row = document.createElement("tr");
      row.dataset.sessionId = String(session.id);
      for (const text of [when(session.created_at), when(session.last_seen_at), session.user_agent || "", session.ip || ""]) {
        const cell = document.createElement("td");
        cell.textContent = text;
        row.append(cell);
      }
      row.children[2].className = "agent";
      const action = document.createElement("td");
      if (session.current) {
        const mark = document.createElement("span");
        mark.className = "current";
        mark.textContent = "this browser";
        action.append(mark, " ");
      }
      const revoke = document.createElement("button");
      revoke.type = "button";
      revoke.className = "revoke";
      revoke.textContent = "Revoke";
      revoke.addEventListener("click", () => revokeSession(session));
      action.append(revoke);
      row.append(action);
      body.append(row);
    }
  }

  async function revokeSession(session) {
    try {
      if (!(await call("DELETE", `/sessions/${session.id}`))) return;
      // Revoking this browser's own session is signing out.
      if (session.current) window.location.assign("/signin.html");
      else refresh();
    } catch (error) {
      status.textContent = error.message;
    }
  }

  async function signOut() {
    try {
      if (await call("POST", "/tokensignout")) window.location.assign("/signin.html");
    } catch (error) {
      status.textContent = error.message;
    }
  }

  function when(rfc3339) {
    return new Date(rfc3339).toLocaleString();
  }
})();
