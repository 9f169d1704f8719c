"""Headless Chromium through chromedriver, and what it put on the wire, read from DevTools' network events."""

import json
from dataclasses import dataclass, field

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# A bound on every wait for a condition (a page loaded, a request answered); conditions are checked every 50 ms.
WAIT = 20.0


@dataclass
class Hop:
    """One request the browser sent (one hop of a redirect chain) and the answer it got."""

    method: str
    url: str
    status: int | None = None
    request_headers: dict = field(default_factory=dict)
    response_headers: dict = field(default_factory=dict)
    # DevTools' view of every cookie the browser considered for this request: sent, or withheld with reasons.
    cookies: list = field(default_factory=list)
    # Cookies the answer tried to set and the browser refused, with reasons.
    refused_set_cookies: list = field(default_factory=list)
    # Set when the request never got an answer (a CORS failure, a refused connection).
    failure: str | None = None

    @property
    def sent_cookies(self):
        return {c["cookie"]["name"]: c["cookie"] for c in self.cookies if not c.get("blockedReasons")}

    @property
    def withheld_cookies(self):
        return {c["cookie"]["name"]: c["blockedReasons"] for c in self.cookies if c.get("blockedReasons")}

    def header(self, name, response=True):
        headers = self.response_headers if response else self.request_headers
        return next((value for key, value in headers.items() if key.lower() == name.lower()), None)

    def __str__(self):
        # What a failing assertion prints: enough to tell which cookie went where and what came back.
        return (f"{self.method} {self.url} -> {self.status if self.failure is None else self.failure}; "
                f"sent cookies {sorted(self.sent_cookies)}, withheld {self.withheld_cookies}, "
                f"Origin {self.header('Origin', response=False)}, Location {self.header('Location')}, "
                f"refused Set-Cookie {self.refused_set_cookies}")


class Browser:
    """One fresh Chromium profile (its own cookie jar) for one test."""

    def __init__(self, artifacts):
        self.artifacts = artifacts
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for argument in [
            "--headless=new",
            "--no-sandbox",                    # the tests may run as root (CI does)
            "--disable-dev-shm-usage",
            "--ignore-certificate-errors",     # nginx-local's self-signed certificate (test only)
            "--window-size=1100,900",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
        ]:
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        self.driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        self.hops_by_request = {}
        self.order = []

    def quit(self):
        self.driver.quit()

    # MARK: pages

    def open(self, url):
        self.driver.get(url)

    def click(self, css):
        self.element(css).click()

    def element(self, css):
        """The first element matching `css`, once it is shown (the pages' scripts reveal some)."""
        def shown(driver):
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found[0] if found and found[0].is_displayed() else None
        return self.wait(shown, f"a visible element {css}")

    def text(self, css):
        return self.element(css).text

    def wait(self, condition, what):
        # A page script that re-renders (the devices list) may replace an element while a condition reads it.
        return WebDriverWait(self.driver, WAIT, poll_frequency=0.05,
                             ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)).until(
            condition, message=f"waited {WAIT:.0f} s for {what}; the page is {self.driver.current_url}")

    def wait_for_url(self, url):
        return self.wait(lambda d: d.current_url == url, f"the browser to be at {url}")

    def screenshot(self, name):
        path = self.artifacts / name
        self.driver.save_screenshot(str(path))
        return path

    # MARK: cookies, as the browser stores them (DevTools shows HttpOnly ones too)

    def cookies(self):
        return {c["name"]: c for c in self.driver.execute_cdp_cmd("Network.getAllCookies", {})["cookies"]}

    # MARK: the network, from chromedriver's performance log

    def hops(self, method=None, url=None):
        """Every hop so far, in the order the browser sent them; filtered by method and exact URL."""
        self._drain()
        return [hop for hop in self.order if (method is None or hop.method == method) and (url is None or hop.url == url)]

    def answered(self, method, url):
        """Waits until the browser has the answer to `method url` (or its failure), and returns that hop."""
        def done(_):
            hops = [hop for hop in self.hops(method, url) if hop.status is not None or hop.failure is not None]
            return hops[-1] if hops else None
        return self.wait(done, f"an answer to {method} {url}; the browser sent {[str(h) for h in self.hops()]}")

    def _drain(self):
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            self._record(message["method"], message.get("params", {}))

    def _record(self, event, params):
        request_id = params.get("requestId")
        if not event.startswith("Network.") or request_id is None:
            return
        chain = self.hops_by_request.setdefault(request_id, {"hops": [], "sent_info": 0, "answer_info": 0})
        named = [hop for hop in chain["hops"] if hop.method]
        if event == "Network.requestWillBeSent":
            # A redirect keeps the request id: the answer to the previous hop comes with the next one.
            redirect = params.get("redirectResponse")
            if redirect and named:
                named[-1].status = redirect["status"]
                named[-1].response_headers = {**redirect.get("headers", {}), **named[-1].response_headers}
            request = params["request"]
            hop = self._hop(chain, len(named))
            hop.method, hop.url = request["method"], request["url"]
            hop.request_headers = {**request.get("headers", {}), **hop.request_headers}
            self.order.append(hop)
        elif event == "Network.requestWillBeSentExtraInfo":
            # The headers and cookies as they went on the wire, one event per hop, in order.
            hop = self._hop(chain, chain["sent_info"])
            chain["sent_info"] += 1
            hop.cookies = params.get("associatedCookies", [])
            hop.request_headers = {**hop.request_headers, **params.get("headers", {})}
        elif event == "Network.responseReceivedExtraInfo":
            hop = self._hop(chain, chain["answer_info"])
            chain["answer_info"] += 1
            hop.refused_set_cookies = [(c.get("cookieLine"), c.get("blockedReasons")) for c in params.get("blockedCookies", [])]
            if hop.status is None:
                hop.status = params.get("statusCode")
            hop.response_headers = {**params.get("headers", {}), **hop.response_headers}
        elif event == "Network.responseReceived" and named:
            named[-1].status = params["response"]["status"]
            named[-1].response_headers = {**params["response"].get("headers", {}), **named[-1].response_headers}
        elif event == "Network.loadingFailed" and named:
            cors = params.get("corsErrorStatus")
            named[-1].failure = params.get("errorText", "failed") + (f" ({cors['corsError']})" if cors else "")

    @staticmethod
    def _hop(chain, index):
        # ExtraInfo events may arrive before the event that names the request: keep a placeholder hop.
        while len(chain["hops"]) <= index:
            chain["hops"].append(Hop(method="", url=""))
        return chain["hops"][index]
