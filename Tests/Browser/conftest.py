"""Fixtures of the browser suite: one stack for the run, one fresh Chromium per test, the forgers' sites."""

import pytest

from browser import Browser
from sites import ForgerySite
from stack import BASE_PORT, Stack


@pytest.fixture(scope="session")
def stack():
    stack = Stack()
    try:
        stack.start()
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="session")
def forgers(stack):
    """Three origins that are not the site's: the browser treats the first as same-site, the others as cross-site.

    https://127.0.0.1:P+3  same host, another port: another origin but the same site (cookies ignore ports), like a
                           sibling subdomain in production; SameSite=Lax cookies go along.
    https://localhost:P+4  another host: another site.
    http://127.0.0.1:P+5   same host over plain http: another site for Chromium (schemeful same-site).
    """
    certificate = (stack.nginx_dir / "cert.pem", stack.nginx_dir / "key.pem")
    sites = {
        "same-site": ForgerySite("127.0.0.1", BASE_PORT + 3, certificate),
        "cross-site": ForgerySite("localhost", BASE_PORT + 4, certificate),
        "cross-site-http": ForgerySite("127.0.0.1", BASE_PORT + 5),
    }
    yield sites
    for site in sites.values():
        site.close()


@pytest.fixture
def browser(stack, request):
    browser = Browser(stack.artifacts)
    yield browser
    # A failed test leaves a picture of where the browser was.
    if getattr(request.node, "failed", False):
        browser.screenshot(f"failed-{request.node.name}.png")
    browser.quit()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call" and report.failed:
        item.failed = True
    return report
