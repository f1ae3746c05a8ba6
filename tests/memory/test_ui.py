"""``tiermem ui``: real server subprocesses over a store the real library filled (the offline rules model),
opened in a real headless Chromium (Debian's, driven by Playwright): the pages, the search box, the graph,
the token, and the governance actions, refused when read-only and confirmed before an erase.

Screenshots go to the test's tmp folder (``TIERMEM_UI_SHOTS`` names another, to refresh tests/data/ui/).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests import servers
from tiermem import MemoryContext, create_memory_capability, system

CHROMIUM, CHROMIUM_ARGS = servers.CHROMIUM, servers.CHROMIUM_ARGS
pytestmark = [
    pytest.mark.xdist_group("ui"),
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: apt-get install chromium chromium-driver"),
]
playwright = pytest.importorskip("playwright.sync_api", reason="the test extra's playwright is not installed")

ALICE = MemoryContext(namespace="acme", user_id="caroline")
TURNS = [
    ("My wife Moni is allergic to shellfish.", "Noted."),
    ("I work at Globex as an engineer.", "Nice."),
    ("My sister Anna lives in Lisbon.", "Lovely."),
]
CORRECTED = "The user works at Initech as an engineer."
LOCAL = {"127.0.0.1", "0.0.0.0"}  # the hosts the servers under test answer on


def _fill(store: str) -> str:
    """Two sessions of caroline, consolidated and digested, a fact corrected (a history chain), and a user in
    another namespace; the id of the corrected fact's new version."""
    mem = system(model="rules", store=store, embedder="hashing", semantic={"relations": True}, digest=True).blocking()
    try:
        for session, turns in (("s-1", TURNS), ("s-2", [("I play the viola on Sundays.", "Fun.")])):
            ctx = MemoryContext(namespace=ALICE.namespace, user_id=ALICE.user_id, session_id=session)
            for said, answered in turns:
                mem.capture(ctx, [{"role": "user", "content": said}, {"role": "assistant", "content": answered}])
            mem.end_session(ctx)
        mem.consolidate(ALICE)
        globex = next(f for f in mem.list(ALICE, tier="semantic").items if "Globex" in f.text)
        new = mem.update(ALICE, globex.id, text=CORRECTED)
        mem.digest(ALICE)
        return new.id
    finally:
        mem.aclose()
        other = create_memory_capability(store=store, embedder="hashing").blocking()
        other.add_semantic_fact(MemoryContext(namespace="other", user_id="dan"), "Dan likes tea.")


class Server:
    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log


def _start(folder: Path, store: str, *options: str) -> Iterator[Server]:
    port = servers.free_port()
    log = folder / f"ui-{port}.log"
    (folder / str(port)).mkdir()
    command = [*servers.tiermem_command(), "ui", "--store", store, "--embedder", "hashing", "--port", str(port)]
    with log.open("a") as out:
        proc = subprocess.Popen(
            [*command, *options], env={**os.environ, **servers.server_env(folder / str(port))},
            stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        )  # fmt: skip
        try:
            servers.wait_for_port(port, proc)
            yield Server(f"http://127.0.0.1:{port}", log)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    servers.assert_no_network(folder / str(port))


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    folder = tmp_path_factory.mktemp("ui")
    store = str(folder / "store")
    return folder, store, _fill(store)


@pytest.fixture(scope="module")
def reader(filled: tuple[Path, str, str]) -> Iterator[Server]:
    folder, store, _ = filled
    (folder / "reader").mkdir()
    yield from _start(folder / "reader", store)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any, tmp_path: Path) -> Iterator[Any]:
    """A page whose requests must all go to the server under test: the pages work without a network."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(60_000)  # a bound for a slow shared machine, not an expected duration
    elsewhere: list[str] = []
    context.on("request", lambda r: None if urlsplit(r.url).hostname in LOCAL else elsewhere.append(r.url))
    yield context.new_page()
    context.close()
    assert not elsewhere, f"the pages asked for something off this machine: {elsewhere}"


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if shots := os.environ.get("TIERMEM_UI_SHOTS"):
        shutil.copy(tmp_path / f"{name}.png", Path(shots) / f"{name}.png")


def test_the_pages_show_users_tiers_facts_history_and_episodes(reader: Server, page: Any, tmp_path: Path,
                                                              filled: tuple[Path, str, str]) -> None:  # fmt: skip
    page.goto(reader.url)
    assert page.locator("h2").all_inner_texts() == ["namespace acme", "namespace other"]
    _shot(page, tmp_path, "users")
    page.get_by_role("link", name="caroline").click()
    assert page.locator("h1").inner_text().startswith("caroline")
    tiers = page.locator("table.counts").first.inner_text()
    assert "semantic" in tiers and "superseded 1" in tiers and "relation" in tiers
    assert "Moni" in page.locator("p.digest").inner_text()
    facts = page.locator("table.facts tr")
    moni = facts.filter(has_text="shellfish")
    assert moni.locator("td").first.inner_text() == "moni" and re.search(r"0\.\d\d", moni.inner_text())
    assert "superseded" in facts.filter(has_text="Globex").inner_text()
    valid = r"\d{4}-\d\d-\d\d → "  # each fact's validity: from when, to now or to when it was superseded
    assert re.search(valid + "now", moni.inner_text())
    assert re.search(valid + r"\d{4}-\d\d-\d\d", facts.filter(has_text="Globex").inner_text())
    assert "turns_parked" in page.locator("#pending").inner_text()
    _shot(page, tmp_path, "user")
    facts.filter(has_text="Globex").get_by_role("link").click()  # the old version: its chain, its turn
    versions = page.locator("li.version")
    assert versions.count() == 2
    assert "superseded" in versions.nth(0).inner_text() and CORRECTED in versions.nth(1).inner_text()
    assert "I work at Globex" in versions.nth(0).locator(".turn").inner_text()
    assert page.locator(".actions").count() == 0  # read-only: no pin, no forget
    _shot(page, tmp_path, "history")
    page.go_back()
    page.locator("ul.episodes a").first.click()
    assert "My wife Moni is allergic to shellfish." in page.locator(".turn").first.inner_text()


def test_the_search_box_shows_recall_ranked_with_why(reader: Server, page: Any, tmp_path: Path) -> None:
    page.goto(f"{reader.url}/u/acme/caroline")
    page.get_by_label("recall query").fill("where does the user work")
    page.get_by_label("recall query").press("Enter")
    page.wait_for_url(re.compile(r"/search\?q="))
    results = page.locator("li.result")
    assert results.count() >= 2
    assert all(re.search(r"score \d+\.\d{3} · relevance to the query \d\.\d{3}", r) for r in results.all_inner_texts())
    current = results.filter(has_text=CORRECTED).filter(has_text="semantic").locator(".why").inner_text()
    assert "superseded" not in current
    old = results.filter(has_text="Globex as an engineer").filter(has_text="semantic")
    assert "superseded" in old.locator(".why").inner_text() and "(past" in old.inner_text()
    _shot(page, tmp_path, "search")


def test_the_graph_draws_its_nodes_and_lists_a_node_s_relations(reader: Server, page: Any, tmp_path: Path) -> None:
    page.goto(f"{reader.url}/u/acme/caroline/graph")
    page.wait_for_selector("#graph[data-settled=true]")
    names = page.locator("#graph g.node").evaluate_all("gs => gs.map(g => g.dataset.name)")
    assert {"user", "moni", "anna"} <= set(names)
    assert page.locator("#graph line.edge").count() >= 2
    box = page.locator("#graph").bounding_box()
    for g in page.locator("#graph g.node circle").all():  # laid out inside the drawing
        b = g.bounding_box()
        assert box["x"] <= b["x"] and b["x"] + b["width"] <= box["x"] + box["width"]
    page.locator('#graph g.node[data-name="moni"]').click()
    assert "married to" in page.locator("#relations").inner_text()
    _shot(page, tmp_path, "graph")


def test_writes_are_refused_without_allow_writes(reader: Server, page: Any) -> None:
    page.goto(f"{reader.url}/u/acme/caroline")
    assert page.get_by_text("Erase").count() == 0 and "read-only" in page.locator("header").inner_text()
    answer = page.request.post(f"{reader.url}/u/acme/caroline/erase", form={"confirm": "caroline"})
    assert answer.status == 403 and "--allow-writes" in answer.text()
    assert page.request.get(f"{reader.url}/u/acme/caroline/export").status == 403
    page.reload()
    assert page.locator("table.facts tr").count() > 2  # nothing erased


def test_a_host_other_than_loopback_is_refused(reader: Server) -> None:
    assert httpx.get(reader.url, headers={"Host": "attacker.example"}).status_code == 421


def test_off_loopback_a_token_is_needed_and_writes_confirm_an_erase(filled: tuple[Path, str, str], page: Any,
                                                                    tmp_path: Path) -> None:  # fmt: skip
    folder, store, corrected_id = filled
    (folder / "writer").mkdir()
    for server in _start(folder / "writer", store, "--host", "0.0.0.0", "--allow-writes", "--model", "rules"):
        printed = re.search(r"tiermem ui: http://0\.0\.0\.0:\d+/\?token=(\S+) ", server.log.read_text())
        assert printed, server.log.read_text()
        assert page.goto(server.url).status == 401
        assert httpx.get(f"{server.url}/", headers={"Authorization": "Bearer wrong-token-123456789"}).status_code == 401
        page.goto(f"{server.url}/?token={printed[1]}")  # sets the cookie, then drops the token from the address
        assert "token" not in page.url and "writes allowed" in page.locator("header").inner_text()
        page.goto(f"{server.url}/u/acme/caroline/memory/{corrected_id}")
        page.get_by_role("button", name="Pin").click()
        assert page.locator("li.version .tag.pin").count() == 1
        page.goto(f"{server.url}/u/acme/caroline")
        page.locator("table.facts tr").filter(has_text="shellfish").get_by_role("link").click()
        forgotten = page.url.rsplit("/", 1)[1]
        page.once("dialog", lambda dialog: dialog.accept())  # the Forget button asks first
        page.get_by_role("button", name="Forget…").click()
        assert page.locator("h1").inner_text() == f"Forgot {forgotten}"
        page.goto(f"{server.url}/u/acme/caroline")
        assert page.locator("table.facts tr").filter(has_text="shellfish").count() == 0
        exported = page.request.get(server.url + page.get_by_role("link", name="Export").get_attribute("href"))
        assert exported.status == 200 and "attachment" in exported.headers["content-disposition"]
        assert json.loads(exported.text().splitlines()[0])["kind"] == "header" and CORRECTED in exported.text()
        assert forgotten not in exported.text()
        page.goto(f"{server.url}/u/acme/caroline")
        page.get_by_role("link", name="Erase…").click()
        page.get_by_role("button", name="Erase for good").click()  # without typing the user id
        assert page.locator("h1").inner_text() == "InvalidArgumentError"
        page.goto(f"{server.url}/")
        assert page.get_by_role("link", name="caroline").count() == 1  # nothing erased
        page.goto(f"{server.url}/u/acme/caroline/erase")
        _shot(page, tmp_path, "erase")
        page.get_by_label("Type the user id to confirm").fill("caroline")
        page.get_by_role("button", name="Erase for good").click()
        assert page.locator("h1").inner_text() == "Erased caroline"
        page.goto(f"{server.url}/")
        assert page.get_by_role("link", name="caroline").count() == 0
        assert printed[1] not in server.log.read_text().replace(printed[0], "")  # printed once, never logged
