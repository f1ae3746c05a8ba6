"""``tiermem ui`` pages its long lists: a real server subprocess over a store with more facts and users than a
page holds, read over HTTP. Following "next" shows every item once, in ``list()``'s order; "previous" walks
back to the same pages; the links keep the filters and the other lists' places; hostile query values get a
400 page saying what was wrong, never a 500.
"""

from __future__ import annotations

import html
import io
import json
import os
import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from tests import servers
from tiermem import MemoryContext, create_memory_capability, system
from tiermem.memory._rest._inspector import PAGE_LIMIT

pytestmark = [pytest.mark.xdist_group("ui"), pytest.mark.slow]

MANY = MemoryContext(namespace="acme", user_id="many")
FACTS = 450
CROWD = PAGE_LIMIT + 5
"""Users in namespace ``crowd``: with ``many``, two pages of users."""
DASH = "\u2013"
"""Between the first and last item a page shows: "items 1\u2013200 of 450"."""
TALKER = MemoryContext(namespace="acme", user_id="talker")
TURNS = PAGE_LIMIT + 30
"""Turns of ``talker``'s one long session, one episode."""


def _fact(i: int) -> dict[str, object]:
    """Fact ``i``: three share each minute (the id orders them), every 5th about moni, every 7th archived."""
    when = (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i // 3)).isoformat()
    record = {
        "id": f"fact_{i:032x}", "namespace": MANY.namespace, "user_id": MANY.user_id, "confidence": 0.8,
        "text": f"The user owns bicycle number {i}.", "subject": "moni" if i % 5 == 0 else "user",
        "status": "archived" if i % 7 == 0 else "active", "created_at": when, "updated_at": when,
        "reinforced_at": when,
    }  # fmt: skip
    return {"kind": "fact", "record": record}


def _fill(store: str) -> None:
    header = {"kind": "header", "format": "tiermem-export", "export_version": 1, "schema_version": "2",
              "embedder_id": "hashing-v1-256", "namespace": MANY.namespace, "user_id": MANY.user_id,
              "exported_at": "2026-01-01T00:00:00+00:00"}  # fmt: skip
    lines = "".join(json.dumps(line) + "\n" for line in [header, *map(_fact, range(FACTS))])
    mem = system(model="rules", store=store, embedder="hashing").blocking()
    start = datetime(2026, 1, 1, tzinfo=UTC)
    said = [
        {"at": start + timedelta(minutes=n), "messages": [{"role": "user", "content": f"Message number {n}."}]}
        for n in range(TURNS)
    ]
    try:
        assert mem.import_(MANY, io.StringIO(lines)).records == {"fact": FACTS}
        assert mem.import_conversations(TALKER, [{"session_id": "s-long", "turns": said}]).episodes == 1
    finally:
        mem.aclose()
    crowd = create_memory_capability(store=store, embedder="hashing").blocking()
    for n in range(CROWD):
        crowd.add_semantic_fact(MemoryContext(namespace="crowd", user_id=f"u{n:03d}"), "The user likes tea.")


class Server:
    def __init__(self, url: str, store: str) -> None:
        self.url, self.store = url, store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("ui-paging")
    store = str(folder / "store")
    _fill(store)
    port = servers.free_port()
    (folder / "server").mkdir()
    command = [*servers.tiermem_command(), "ui", "--store", store, "--embedder", "hashing", "--port", str(port)]
    with (folder / "ui.log").open("a") as out:
        proc = subprocess.Popen(
            command, env={**os.environ, **servers.server_env(folder / "server")}, stdin=subprocess.DEVNULL,
            stdout=out, stderr=out,
        )  # fmt: skip
        try:
            servers.wait_for_port(port, proc)
            yield Server(f"http://127.0.0.1:{port}", store)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    servers.assert_no_network(folder / "server")


PARTS = {  # where a list is on its page, and what it shows of each item
    "facts": ('<section id="facts">', '<section id="episodes">', r'<a href="/u/acme/many/memory/(fact_\w+)">'),
    "users": ('<div id="users">', "</main>", r'<a href="/u/(\w+/\w+)">'),
    "turns": ("<h2>History</h2>", "</main>", r"<b>user</b>: Message number (\d+)\."),
}


def _part(page: str, anchor: str) -> str:
    begin, end, _ = PARTS[anchor]
    assert begin in page, f"no {begin} on the page"
    return page.split(begin, 1)[1].split(end, 1)[0]


def _links(part: str, rel: str) -> set[str]:
    return {html.unescape(h) for h in re.findall(rf'<a rel="{rel}" href="([^"]+)"', part)}


def _walk(client: httpx.Client, start: str, anchor: str, rel: str) -> list[tuple[list[str], str, str]]:
    """Each page from ``start`` following ``rel`` links: its items, its "X to Y of N" and its address."""
    pages, address = [], start
    while True:
        answer = client.get(address)
        assert answer.status_code == 200, answer.text
        part = _part(answer.text, anchor)
        counted = re.search(rf"\d+{DASH}\d+ of \d+", part)
        pages.append((re.findall(PARTS[anchor][2], part), counted[0] if counted else "", address))
        following = _links(part, rel)
        assert len(following) <= 1, following  # the pager above the list and the one below agree
        if not following:
            return pages
        address = following.pop()


@pytest.mark.parametrize(
    ("query", "anchor", "filters", "count"),
    [
        ("", "facts", {}, FACTS),
        ("?subject=user&status=active", "facts", {"subject": "user", "status": "active"}, 308),
        ("?subject=Moni", "facts", {"subject": "moni"}, FACTS // 5),
        ("", "users", {}, CROWD + 2),
        ("", "turns", {}, TURNS),
    ],
    ids=["all-facts", "active-facts-about-the-user", "facts-about-moni-one-page", "users", "turns-of-an-episode"],
)
def test_following_next_shows_every_item_once_and_previous_walks_back(
    server: Server, query: str, anchor: str, filters: dict[str, str], count: int
) -> None:
    mem = create_memory_capability(store=server.store, embedder="hashing").blocking()
    if anchor == "users":
        path, everyone = "/", ["acme/many", "acme/talker", *(f"crowd/u{n:03d}" for n in range(CROWD))]
    elif anchor == "turns":
        (episode,) = mem.list(TALKER, tier="episodic").items
        path, everyone = f"/u/acme/talker/memory/{episode.id}", [str(n) for n in range(TURNS)]
    else:
        path = "/u/acme/many"
        everyone = [
            i.id
            for i in mem.list(
                MANY, tier="semantic", limit=1000, subject=filters.get("subject"), status=filters.get("status")
            ).items
        ]
    with httpx.Client(base_url=server.url) as client:
        forward = _walk(client, path + query, anchor, "next")
        seen = [item for items, _, _ in forward for item in items]
        assert len(everyone) == count
        assert seen == everyone and len(set(seen)) == len(seen)  # none twice, none missing, list()'s order
        if len(everyone) > PAGE_LIMIT:
            assert [counted for _, counted, _ in forward] == [
                f"{n + 1}{DASH}{min(n + PAGE_LIMIT, len(everyone))} of {len(everyone)}"
                for n in range(0, len(everyone), PAGE_LIMIT)
            ]
        else:
            assert len(forward) == 1 and forward[0][1] == ""  # one page: no pager
        back = _walk(client, forward[-1][2], anchor, "prev")
        assert [items for items, _, _ in reversed(back)] == [items for items, _, _ in forward]


def test_page_links_keep_the_filters_and_the_other_lists_places(server: Server) -> None:
    with httpx.Client(base_url=server.url) as client:
        first = client.get("/u/acme/many", params={"subject": "user", "status": "active"}).text
        (second,) = _links(_part(first, "facts"), "next")
        place = parse_qs(urlsplit(second).query)
        assert urlsplit(second).fragment == "facts"
        assert place.keys() == {"subject", "status", "facts"} and (place["subject"], place["status"]) == (
            ["user"], ["active"],
        )  # fmt: skip
        elsewhere = place["facts"][0]  # any list's cursor is a place in the episodes too (after it: none)
        page = client.get(f"{urlsplit(second).path}?{urlsplit(second).query}&episodes={elsewhere}").text
        (back,) = _links(_part(page, "facts"), "prev")
        kept = parse_qs(urlsplit(back).query)
        assert kept.keys() == {"subject", "status", "episodes"}  # back to the first page: no facts cursor
        assert kept["episodes"] == [elsewhere]
        assert (kept["subject"], kept["status"]) == (["user"], ["active"])
        form = _part(page, "facts").split("</form>")[0]  # a new filter starts the facts over, keeps the rest
        assert f'name="episodes" value="{elsewhere}"' in form and 'name="facts"' not in form
        assert 'name="subject" value="user"' in form and "<option selected>active</option>" in form


CURSOR = "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgImZhY3RfeCIsICJzaWRld2F5cyJd"
"""A well-formed cursor paging neither forward nor back: ``[time, id, "sideways"]``."""


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("/u/acme/many?facts=not-a-cursor", "facts='not-a-cursor' is no place in the list: follow its links"),
        (f"/u/acme/many?episodes={CURSOR}", "episodes='WyIy"),
        ("/u/acme/many?working=" + "A" * 5000, "at most 4096 characters"),
        ("/u/acme/many?status=deleted", "status must be one of active, superseded, archived"),
        ("/u/acme/many?subject=%3Cscript%3E", "invalid subject '<script>'"),
        ("/u/acme/many?subject=" + "x" * 100, "at most 64 characters"),
        ("/?users=-1", "greater than or equal to 0"),
        ("/?users=two", "valid integer"),
        ("/?users=1e99", "valid integer"),
        ("/u/acme/talker/memory/ep_x?turns=-5", "greater than or equal to 0"),
    ],
    ids=["garbage-cursor", "sideways-cursor", "huge-cursor", "unknown-status", "markup-subject", "long-subject",
         "negative-offset", "word-offset", "float-offset", "negative-turns"],
)  # fmt: skip
def test_hostile_query_values_get_a_400_saying_what_was_wrong(server: Server, address: str, said: str) -> None:
    answer = httpx.get(server.url + address)
    assert answer.status_code == 400 and said in html.unescape(answer.text), answer.text
    assert "<script>" not in answer.text


def test_an_offset_past_the_last_user_links_back_to_the_last_page(server: Server) -> None:
    part = _part(httpx.get(server.url + "/?users=100000").text, "users")
    assert re.findall(PARTS["users"][2], part) == [] and _links(part, "next") == set()
    assert _links(part, "prev") == {f"/?users={PAGE_LIMIT}#users"}


@pytest.mark.skipif(
    not servers.CHROMIUM.exists(), reason="no /usr/bin/chromium: apt-get install chromium chromium-driver"
)
def test_a_browser_follows_next_and_previous_through_the_facts(server: Server) -> None:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the test extra's playwright is not installed")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(servers.CHROMIUM), headless=True, args=servers.CHROMIUM_ARGS)
        try:
            page = chromium.new_page()
            page.set_default_timeout(60_000)  # a bound for a slow shared machine, not an expected duration
            page.goto(f"{server.url}/u/acme/many")
            page.get_by_label("subject").fill("user")
            page.get_by_label("status").select_option("active")
            page.get_by_role("button", name="Filter").click()
            pager = page.locator("#facts nav.pager").first
            assert pager.inner_text().split() == ["facts", f"1{DASH}200", "of", "308", "next", "\u2192"]
            first = page.locator("table.facts a").all_inner_texts()
            pager.get_by_role("link", name="next").click()
            page.wait_for_url(re.compile(r"[?&]facts=.*#facts$"))
            assert f"201{DASH}308 of 308" in page.locator("#facts nav.pager").first.inner_text()
            second = page.locator("table.facts a").all_inner_texts()
            assert len(first) == PAGE_LIMIT and len(second) == 108 and not set(first) & set(second)
            assert page.get_by_label("subject").input_value() == "user"  # the filter stays on the next page
            page.locator("#facts nav.pager").first.get_by_role("link", name="previous").click()
            page.wait_for_url(re.compile(r"subject=user&status=active#facts$"))
            assert page.locator("table.facts a").all_inner_texts() == first
        finally:
            chromium.close()
