"""The web flow of docs/http.md in Chromium: sign-in through the stand-in for Google, the app page, devices, sign-out."""

import time
import urllib.parse

import pytest

COOKIE = "__Host-tokensignin"


def sign_in(browser, stack, account):
    """The whole redirect-mode flow, clicked through: sign-in page -> stand-in (another site) -> POST -> 303 -> /app/."""
    browser.open(stack.site + "/")
    browser.click("#standin-signin")
    browser.click(f"#account-{account.sub}")
    post = browser.answered("POST", stack.site + "/tokensignin")
    assert post.status == 303, f"the web form sign-in was not answered 303: {post}"
    browser.wait_for_url(stack.site + "/app/")
    browser.wait(lambda d: browser.text("#user-sub") == account.sub, f"the app page to show {account.sub}")
    return post


def withheld_for(hop, name, rule):
    """True when the browser withheld cookie `name` from `hop`, its SameSite attribute (`rule`) being one reason.

    DevTools names the rule SameSiteLax or SchemefulSameSiteLax (Chromium 156 says the latter even between two
    https origins). A cross-site fetch is also refused third-party cookies ("UserPreferences"): the SameSite
    reason alone would keep the cookie off.
    """
    reasons = hop.withheld_cookies.get(name) or []
    return rule in reasons or "Schemeful" + rule in reasons


def stand_in_url(stack, csrf):
    """The stand-in's address as the sign-in page builds it (and Google's library builds Google's)."""
    return stack.standin + "/?" + urllib.parse.urlencode({
        "client_id": stack.client_id, "login_uri": stack.site + "/tokensignin", "ux_mode": "redirect",
        "g_csrf_token": csrf})


def test_stand_in_sign_in_lands_on_the_app_page_with_a_secure_http_only_lax_host_cookie(browser, stack):
    before = stack.sessions(stack.ada)
    started = time.time()
    post = sign_in(browser, stack, stack.ada)

    # The POST came from the stand-in's page, cross-site, with the double-submit cookie set on the site.
    assert post.header("Origin", response=False) == stack.standin, f"Origin of the web form post: {post}"
    assert post.header("Sec-Fetch-Site", response=False) == "cross-site", str(post)
    assert "g_csrf_token" in post.sent_cookies, f"the g_csrf_token cookie did not reach the cross-site POST: {post}"
    assert post.header("Location") == "/app/", str(post)
    assert post.refused_set_cookies == [], f"the browser refused a cookie of the sign-in answer: {post}"

    cookie = browser.cookies().get(COOKIE)
    assert cookie is not None, f"no {COOKIE} in the browser's cookie jar: {sorted(browser.cookies())}"
    attributes = {key: cookie[key] for key in ("secure", "httpOnly", "sameSite", "path", "domain", "session")}
    assert attributes == {"secure": True, "httpOnly": True, "sameSite": "Lax", "path": "/", "domain": "127.0.0.1",
                          "session": False}, f"session cookie attributes: {cookie}"
    assert started + stack.session_ttl - 60 <= cookie["expires"] <= time.time() + stack.session_ttl + 60, \
        f"Max-Age is not TOKENSIGNIN_SESSION_TTL ({stack.session_ttl} s): expires {cookie['expires']}, now {time.time()}"
    assert COOKIE not in browser.driver.execute_script("return document.cookie"), "the page's script can read the session"

    # The cookie went along to the protected page (the 303's GET, nginx auth_request) and to the page's own check.
    app = browser.hops("GET", stack.site + "/app/")[-1]
    assert app.status == 200 and COOKIE in app.sent_cookies, f"the protected page: {app}"
    check = browser.answered("GET", stack.site + "/auth/session")
    assert check.status == 200 and COOKIE in check.sent_cookies, f"the page's session check: {check}"

    # One new live session in the database, the one the page shows; the devices list shows every live one.
    new = [session for session in stack.sessions(stack.ada) if session not in before]
    assert len(new) == 1 and new[0][1] == "", f"sessions of {stack.ada.sub}: before {before}, now {stack.sessions(stack.ada)}"
    assert browser.text("#session-id") == str(new[0][0])
    assert browser.text("#user-email") == stack.ada.email
    live = len(stack.live_sessions(stack.ada))
    browser.wait(lambda d: len(d.find_elements("css selector", "#sessions tr")) == live, f"{live} devices listed")
    current = browser.element("#sessions tr .current").find_element("xpath", "../..")
    assert current.get_attribute("data-session-id") == str(new[0][0]), "'this browser' marks another session"
    browser.screenshot("signed-in.png")


# (how the relying party's page sets g_csrf_token, signed in?, why Chromium withholds it from the cross-site POST)
@pytest.mark.parametrize("attributes, signed_in, withheld", [
    ("Secure; SameSite=None", True, None),
    # No SameSite attribute: treated as Lax, but Chromium still sends a cookie younger than two minutes on a
    # top-level cross-site POST ("Lax+POST"); one older, or any Lax or Strict one, never reaches it.
    ("Secure", True, None),
    ("Secure; SameSite=Lax", False, "SameSiteLax"),
    ("Secure; SameSite=Strict", False, "SameSiteStrict"),
    (None, False, None),
], ids=["samesite-none", "samesite-unset-fresh", "samesite-lax", "samesite-strict", "no-cookie"])
def test_web_form_is_signed_in_only_when_the_browser_sends_the_g_csrf_token_cookie(browser, stack, attributes, signed_in,
                                                                                    withheld):
    before = stack.sessions(stack.grace)
    csrf = f"csrf{time.time_ns()}"
    browser.open(stack.site + "/signin.html")
    if attributes is not None:
        browser.driver.execute_script(f"document.cookie = 'g_csrf_token={csrf}; Path=/; {attributes}';")
    browser.open(stand_in_url(stack, csrf))
    browser.click(f"#account-{stack.grace.sub}")
    post = browser.answered("POST", stack.site + "/tokensignin")

    if signed_in:
        assert post.status == 303 and post.sent_cookies.get("g_csrf_token", {}).get("value") == csrf, str(post)
        assert len(stack.sessions(stack.grace)) == len(before) + 1
    else:
        assert post.status == 403, f"a web form without its g_csrf_token cookie was not refused: {post}"
        assert "g_csrf_token" not in post.sent_cookies, str(post)
        if withheld:
            assert withheld_for(post, "g_csrf_token", withheld), f"the cookie was not withheld for {withheld}: {post}"
        assert '"error":"csrf_check_failed"' in browser.driver.find_element("tag name", "body").text
        assert stack.sessions(stack.grace) == before, "a refused sign-in changed the database"
        assert COOKIE not in browser.cookies()


def test_revoking_another_session_on_the_devices_page_signs_that_device_out(browser, stack):
    # Another device: a native client signs in with the JSON body and keeps its Bearer token.
    phone = stack.request("POST", "/tokensignin", headers={"Content-Type": "application/json", "User-Agent": "phone/1.0"},
                          body='{"idToken":"%s"}' % stack.token(stack.ada))
    assert phone.status == 200, f"the phone's sign-in: {phone.status} {phone.body}"
    phone_token = phone.json["session"]["token"]
    sign_in(browser, stack, stack.ada)

    rows = browser.wait(lambda d: rows_by_agent(d) if len(rows_by_agent(d)) >= 2 else None, "two devices listed")
    assert "phone/1.0" in rows, f"devices listed: {list(rows)}"
    phone_id = int(rows["phone/1.0"].get_attribute("data-session-id"))
    rows["phone/1.0"].find_element("css selector", "button.revoke").click()

    delete = browser.answered("DELETE", f"{stack.site}/sessions/{phone_id}")
    assert delete.status == 204, f"revoking from the devices page: {delete}"
    assert delete.header("Origin", response=False) == stack.site and COOKIE in delete.sent_cookies, str(delete)
    browser.wait(lambda d: "phone/1.0" not in rows_by_agent(d), "the phone to leave the list")
    browser.driver.refresh()
    browser.wait(lambda d: len(rows_by_agent(d)) >= 1, "the devices list after a reload")
    assert "phone/1.0" not in rows_by_agent(browser.driver), "the revoked session is listed again after a reload"

    assert dict(stack.sessions(stack.ada))[phone_id] == "user_revoked"
    check = stack.request("GET", "/auth/session", headers={"Authorization": f"Bearer {phone_token}"})
    assert check.status == 401, f"the revoked phone still passes the session check: {check.status}"


def rows_by_agent(driver):
    return {row.find_elements("css selector", "td")[2].text: row
            for row in driver.find_elements("css selector", "#sessions tr")}


def test_sign_out_ends_the_session_and_the_app_page_then_sends_the_browser_to_sign_in(browser, stack):
    sign_in(browser, stack, stack.grace)
    session_id = int(browser.text("#session-id"))
    browser.click("#signout")
    sign_out = browser.answered("POST", stack.site + "/tokensignout")
    assert sign_out.status == 204 and COOKIE in sign_out.sent_cookies, f"sign-out: {sign_out}"
    browser.wait_for_url(stack.site + "/signin.html")
    assert COOKIE not in browser.cookies(), f"the cookie survived sign-out: {browser.cookies().get(COOKIE)}"
    assert dict(stack.sessions(stack.grace))[session_id] == "sign_out"

    browser.open(stack.site + "/app/")
    browser.wait_for_url(stack.site + "/signin.html")
    app = browser.hops("GET", stack.site + "/app/")[-1]
    assert app.status == 302 and app.header("Location").endswith("/signin.html"), f"/app/ after sign-out: {app}"


# (forger, page, what it sends, status the responder answers or None when the request never leaves the browser,
#  whether the browser attaches the session cookie)
FORGERIES = [
    # Another site: SameSite=Lax keeps the cookie off every cross-site POST, so the responder sees no session.
    ("cross-site", "post", "/tokensignout", 401, False),
    ("cross-site", "no-cors", "/tokensignout", 401, False),
    ("cross-site-http", "post", "/tokensignout", 401, False),
    # The same site on another origin (a sibling subdomain in production): the cookie goes along, and the
    # Origin check refuses the change.
    ("same-site", "post", "/tokensignout", 403, True),
    ("same-site", "no-cors", "/tokensignout", 403, True),
    ("same-site", "post", "/tokensignout?all=1", 403, True),
    # DELETE needs a CORS preflight, which the responder does not grant: the DELETE is never sent.
    ("same-site", "fetch", "/sessions/ID", None, None),
    ("cross-site", "fetch", "/sessions/ID", None, None),
]


@pytest.mark.parametrize("forger, page, path, status, cookie_sent", FORGERIES,
                         ids=[f"{f}-{p}-{path.strip('/').replace('/', '-')}" for f, p, path, _, _ in FORGERIES])
def test_another_origins_page_cannot_sign_out_or_revoke_for_the_user(browser, stack, forgers, forger, page, path,
                                                                     status, cookie_sent):
    sign_in(browser, stack, stack.ada)
    session_id = int(browser.text("#session-id"))
    before = stack.sessions(stack.ada)
    target = stack.site + path.replace("ID", str(session_id))

    extra = {"method": "DELETE"} if page == "fetch" else {}
    browser.open(forgers[forger].url(page, target=target, **extra))
    if status is None:
        browser.wait(lambda d: d.title.startswith("failed"), "the forged fetch to fail")
        delete = browser.answered("DELETE", target)
        assert "Preflight" in (delete.failure or ""), f"the forged DELETE did not fail its CORS preflight: {delete}"
        preflight = browser.answered("OPTIONS", target)
        assert preflight.status == 405 and not preflight.sent_cookies, f"the preflight: {preflight}"
        # What reached nginx decides: the preflight only, never the DELETE.
        assert stack.methods_received(path.replace("ID", str(session_id))) == ["OPTIONS"]
    else:
        forged = browser.answered("POST", target)
        assert forged.status == status, f"forged request from {forgers[forger].origin}: {forged}"
        assert (COOKIE in forged.sent_cookies) == cookie_sent, f"session cookie sent? {forged}"
        if not cookie_sent:
            assert withheld_for(forged, COOKIE, "SameSiteLax"), f"the cookie was not withheld for SameSite=Lax: {forged}"
        if status == 403 and page == "post":
            assert '"error":"csrf_check_failed"' in browser.driver.find_element("tag name", "body").text

    assert stack.sessions(stack.ada) == before, "a forged request changed the database"
    browser.open(stack.site + "/app/")
    browser.wait(lambda d: browser.text("#session-id") == str(session_id), "the app page, still signed in")


# (forger, form fields, the g_csrf_token cookie the forger's page writes first): another origin's page posting a
# sign-in of its own choosing (login CSRF). A same-site page can write the cookie for the site (cookies ignore
# ports; a sibling subdomain can write one for the parent domain), so the pair matches: its Origin is refused.
@pytest.mark.parametrize("forger, fields, set_cookie", [
    ("cross-site", {"credential": "TOKEN", "g_csrf_token": "forged"}, None),
    ("same-site", {"credential": "TOKEN", "g_csrf_token": "forged"}, None),
    ("same-site", {"credential": "TOKEN", "g_csrf_token": "forged"}, "g_csrf_token=forged; Path=/; Secure; SameSite=None"),
    ("cross-site", {"idtoken": "TOKEN"}, None),
    ("same-site", {"idtoken": "TOKEN"}, None),
], ids=["cross-site-web-form", "same-site-web-form", "same-site-web-form-with-its-cookie", "cross-site-idtoken",
        "same-site-idtoken"])
def test_another_origins_page_cannot_sign_the_browser_in(browser, stack, forgers, forger, fields, set_cookie):
    before = stack.sessions(stack.grace)
    token = stack.token(stack.grace)
    parameters = {name: token if value == "TOKEN" else value for name, value in fields.items()}
    if set_cookie:
        parameters["set_cookie"] = set_cookie
    browser.open(forgers[forger].url("post", target=stack.site + "/tokensignin", **parameters))
    forged = browser.answered("POST", stack.site + "/tokensignin")
    assert forged.status == 403, f"a sign-in posted by {forgers[forger].origin}: {forged}"
    if set_cookie:
        assert forged.sent_cookies.get("g_csrf_token", {}).get("value") == "forged", f"the forger's cookie: {forged}"
    assert '"error":"csrf_check_failed"' in browser.driver.find_element("tag name", "body").text
    assert stack.sessions(stack.grace) == before and COOKIE not in browser.cookies()
