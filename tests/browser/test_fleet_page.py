"""The fleet page in a real browser: the page made by gpufleet.tuning.fleet_report from a fixed
fleet of 16 hosts (tests/unit/fleet_artifacts_fake.py: a failed canary, a drifted host, hosts
without P2P, a short pair, staged copies, a failed benchmark gate, a damaged record...) is opened
in headless Chromium at 1280 px and on a phone's 390 x 844. Every host, finding and chart must be
in the DOM and drawn, nothing may be fetched, the console must stay clean, and the page must not
scroll sideways (wide parts scroll in their own boxes). Screenshots are kept in tests/output/browser/.
"""

import os
import shutil

import pytest

from ansible_collections.gpufleet.tuning.plugins.action import fleet_report
from ansible_collections.gpufleet.tuning.plugins.plugin_utils.report import collect
from ansible_collections.gpufleet.tuning.tests.unit import fleet_artifacts_fake as fake

OPEN_ALL = "document.querySelectorAll('details').forEach(d => d.open = true); document.body.offsetHeight"

# Everything on the page that reaches past the viewport's right edge, unless it sits inside a
# scroll box that itself ends inside the viewport.
OVERFLOWING = """(() => {
  const limit = document.documentElement.clientWidth + 1, found = [];
  for (const e of document.body.querySelectorAll('*')) {
    const r = e.getBoundingClientRect();
    if (r.width === 0 || r.right <= limit) continue;
    const box = e.closest('.scroll');
    if (box && box !== e && box.getBoundingClientRect().right <= limit) continue;
    if (box === e && r.right <= limit) continue;
    found.push(e.tagName + (e.id ? '#' + e.id : '') + '.' + (e.getAttribute('class') || '') + ' ' + Math.round(r.right));
  }
  return found.slice(0, 20);
})()"""


@pytest.fixture(scope="module")
def site(tmp_path_factory, output):
    root = str(tmp_path_factory.mktemp("fleet") / "artifacts")
    kinds = fake.write_fleet(root, 16)
    planned = fleet_report.plan(root)
    with open(planned["path"], "wb") as handle:
        handle.write(planned["content"])
    shutil.copy(planned["path"], os.path.join(output, "index.html"))
    return {"root": root, "kinds": kinds, "model": planned["model"], "url": "file://" + planned["path"]}


@pytest.fixture(scope="module")
def desktop(browser, site, output):
    page = browser.page(1280, 900)
    page.load(site["url"])
    page.screenshot(os.path.join(output, "desktop-1280.png"))
    page.evaluate(OPEN_ALL)
    page.screenshot(os.path.join(output, "desktop-1280-full.png"), full=True)
    for selector, name in (("#findings", "findings"), ("#rollout", "rollout"), ("#drift", "drift")):
        page.screenshot_of(selector, os.path.join(output, "desktop-%s.png" % name))
    for kind in ("canary_failed", "short_pair", "staged", "gate_failed"):
        host = _host(site, kind)
        page.screenshot_of("#" + host["id"], os.path.join(output, "desktop-host-%s.png" % kind))
    return page


@pytest.fixture(scope="module")
def phone(browser, site, output):
    page = browser.page(390, 844, mobile=True, scale=2)
    page.load(site["url"])
    page.screenshot(os.path.join(output, "phone-390.png"))
    page.evaluate(OPEN_ALL)
    page.screenshot(os.path.join(output, "phone-390-full.png"), full=True)
    page.screenshot_of("#" + _host(site, "canary_failed")["id"], os.path.join(output, "phone-host-canary.png"))
    return page


def _host(site, kind):
    name = next(n for n, k in site["kinds"].items() if k == kind)
    return next(h for h in site["model"]["hosts"] if h["name"] == name)


def test_every_host_is_on_the_page(desktop, site):
    shown = desktop.evaluate("[...document.querySelectorAll('details.host')].map(d => d.dataset.host)")
    assert sorted(shown) == sorted(site["kinds"])
    rows = desktop.evaluate("[...document.querySelectorAll('table.grid tbody tr')].map(r => r.dataset.host)")
    assert sorted(rows) == sorted(site["kinds"])
    links = desktop.evaluate("[...document.querySelectorAll('#attention a')].map(a => a.textContent)")
    assert links[:2] == ["gpu-node-01", "gpu-node-02"]


def test_every_finding_has_its_cell_and_link(desktop, site):
    cells = desktop.evaluate("""[...document.querySelectorAll('table.grid tbody tr')].flatMap(r =>
        [...r.querySelectorAll('td.f')].map(c => [r.dataset.host, c.dataset.rule, c.textContent,
                                                  c.querySelector('a').getAttribute('href')]))""")
    seen = dict(((host, rule), (label, href)) for host, rule, label, href in cells)
    for host in site["model"]["hosts"]:
        audit = host["audit"]
        if not audit:
            continue
        for finding in audit["findings"]:
            label, href = seen[(host["name"], finding["rule"])]
            assert label.startswith(finding["severity"]), (host["name"], finding["rule"], label)
            assert href.startswith(host["folder"].replace("%", "%25") + "/system-improve.md#"), href
        for entry in audit["unknown"]:
            if entry["rule"] not in set(f["rule"] for f in audit["findings"]):
                assert seen[(host["name"], entry["rule"])][0] == "?"
    columns = desktop.evaluate("[...document.querySelectorAll('table.grid th.r')].map(t => t.dataset.rule)")
    assert columns == [c["rule"] for c in site["model"]["columns"]]


def test_every_chart_is_drawn(desktop, site):
    drawn = desktop.evaluate("""Object.fromEntries([...document.querySelectorAll('details.host')].map(d => [d.dataset.host,
        ['hm', 'bars', 'eff'].map(k => [...d.querySelectorAll('svg.' + k)].filter(s => {
            const r = s.getBoundingClientRect(); return r.width > 50 && r.height > 50; }).length)]))""")
    for host in site["model"]["hosts"]:
        p2p = host["p2p"]
        heatmaps = 0
        if p2p["status"] == "measured":
            heatmaps = sum(1 for key, _f, _k, _t in collect.MATRICES
                           if not (key.endswith("staged") and all(v is None for r in p2p["matrices"][key] for v in r)))
        benched = 1 if host["benchmark"] else 0
        assert drawn[host["name"]] == [heatmaps, 3 * benched, benched], host["name"]
    assert desktop.evaluate("document.querySelector('#rollout-timeline svg.tl').getBoundingClientRect().width") > 100
    short = desktop.evaluate("document.querySelectorAll('svg.hm rect.short').length")
    assert short == sum(len(h["p2p"].get("short") or ()) for h in site["model"]["hosts"])


def test_hosts_without_p2p_or_benchmark_say_so(desktop, site):
    for kind, text in (("one_gpu", "1 GPU(s) visible"), ("p2p_off", "not measured"), ("audit_only", "no verify.json")):
        host = _host(site, kind)
        shown = desktop.evaluate("document.querySelector('#%s .p2p-none').textContent" % host["id"])
        assert text in shown, (kind, shown)
    assert desktop.evaluate("document.querySelectorAll('.bench-none').length") == sum(
        1 for h in site["model"]["hosts"] if not h["benchmark"])


def test_the_rollout_and_the_drift_are_shown(desktop, site):
    batches = desktop.evaluate("[...document.querySelectorAll('#rollout-batches tr[data-batch]')].length")
    assert batches == len(site["model"]["rollout"]["batches"])
    failed = desktop.evaluate("[...document.querySelectorAll('#rollout-failures tr[data-host]')].map(r => r.dataset.host)")
    assert failed == ["gpu-node-01"]
    drift = desktop.evaluate("[...document.querySelectorAll('#drift-recorded tr[data-host]')].map(r => r.dataset.host)")
    assert drift == ["gpu-node-02", "gpu-node-02"]


def test_nothing_is_fetched_and_the_console_is_clean(desktop, site):
    assert desktop.console_errors() == []
    assert desktop.requests() == [site["url"]]
    assert desktop.evaluate("document.scripts.length") == 0


def test_no_sideways_scroll_at_1280(desktop):
    assert desktop.evaluate("document.documentElement.scrollWidth") <= desktop.evaluate("innerWidth")
    assert desktop.evaluate(OVERFLOWING) == []


def test_readable_on_a_phone(phone):
    assert phone.evaluate("innerWidth") == 390
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    assert phone.evaluate(OVERFLOWING) == []
    sizes = phone.evaluate("[...document.querySelectorAll('p, li, td, summary')].map(e => "
                           "parseFloat(getComputedStyle(e).fontSize))")
    assert min(sizes) >= 12
    grid = phone.evaluate("(() => { const s = document.querySelector('table.grid').closest('.scroll'); "
                          "return [s.scrollWidth > s.clientWidth, getComputedStyle(s).overflowX]; })()")
    assert grid == [True, "auto"], "the grid scrolls in its own box"
    assert phone.console_errors() == []
