"""The table of contents (issue 39): a document's section tree from its chunks, the `navigate` search
method that finds a section by its title and ranks the chunks inside it, and the console's panel."""

import pytest

from ingest.actions import ingest_document, rerun_document
from ingest.tasks import run_inline
from memory.actions import delete_document
from memory.models import Chunk
from memory.toc import document_tree
from tenants.access import permitted_scope
from tests.conftest import api_client

pytestmark = pytest.mark.usefixtures("lite_vector_settings", "warm_embedding_cache", "api_schema_check")

# The answer to "how does parental leave work?" sits under "Parental leave"; neither word is in its text.
HANDBOOK = """# Staff handbook

## Parental leave

After a birth or an adoption, staff may stay home for twenty weeks, paid in full for the first twelve.

## Travel expenses

Receipts for trains, hotels and meals are submitted within thirty days through the finance portal.

## Remote work

Up to three days a week can be worked from home, with the team lead's agreement.

### Equipment

A laptop and a second screen are lent for the home office and returned when the contract ends.
"""


def ingest(user, kb, tmp_path, name, text, metadata=None):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with open(path, "rb") as fh:
        upload = ingest_document(permitted_scope(user, write=True), kb, fh, name, metadata=metadata)
    document = run_inline(upload.document.pk)
    assert document.status == "ready", document.error
    return document


def navigate(client, query, **extra):
    response = client.post("/api/v1/memories/search", {"query": query, "method": "navigate", **extra}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def section_of(item) -> list[str]:
    return item["sources"][0]["section_path"]


@pytest.fixture
def handbook(world, tmp_path):
    return ingest(world.alice, world.docs, tmp_path, "handbook.md", HANDBOOK)


def test_the_tree_folds_the_chunks_section_paths_in_reading_order(handbook):
    [root] = document_tree(handbook)
    assert root.title == "Staff handbook"
    assert [s.title for s in root.children] == ["Parental leave", "Travel expenses", "Remote work"]
    remote = root.children[2]
    assert [s.title for s in remote.children] == ["Equipment"]
    assert remote.summary.startswith("Up to three days a week")
    # a section holds its subsections' chunks: descending into "Remote work" reaches "Equipment" too
    assert set(remote.children[0].parent_ids) < set(remote.parent_ids)


def test_navigate_finds_a_section_by_its_title_when_the_chunk_never_says_it(world, handbook):
    client = api_client(world.alice_key)
    keyword = client.post("/api/v1/memories/search", {"query": "parental leave", "method": "keyword",
                                                      "memory_types": ["chunk"]}, format="json").json()
    assert not any(section_of(c)[-1] == "Parental leave" for c in keyword["chunks"])  # the chunk's words miss it

    body = navigate(client, "How does parental leave work?")
    assert body["query"]["answered_by"] == "navigate"
    first = body["chunks"][0]
    assert section_of(first) == ["Staff handbook", "Parental leave"]
    assert "twenty weeks" in first["text"]
    assert first["scores"]["section"] > 0 and first["rank"] == 1
    assert body["facts"] == [] and body["episodes"] == []


def test_a_section_found_by_title_brings_its_subsections_chunks(world, handbook):
    body = navigate(api_client(world.alice_key), "What does the remote work policy say about equipment?")
    sections = [tuple(section_of(c)) for c in body["chunks"][:2]]
    assert ("Staff handbook", "Remote work", "Equipment") in sections


def test_another_tenants_sections_never_reach_a_search(world, handbook, tmp_path):
    theirs = ingest(world.charlie, world.secret, tmp_path, "globex.md",
                    "# Globex policies\n\n## Parental leave\n\nGlobex staff get forty weeks at home on full pay.\n")
    ours = navigate(api_client(world.alice_key), "parental leave")
    assert ours["chunks"] and {c["sources"][0]["document_id"] for c in ours["chunks"]} == {handbook.pk}
    assert not any("forty weeks" in c["text"] for c in ours["chunks"])
    their_answer = navigate(api_client(world.charlie_key), "parental leave")
    assert {c["sources"][0]["document_id"] for c in their_answer["chunks"]} == {theirs.pk}
    # a document filter naming the other tenant's document finds nothing, not its sections
    assert navigate(api_client(world.alice_key), "parental leave",
                    filters={"document_id": [theirs.pk]})["chunks"] == []


def test_a_document_filter_keeps_navigate_inside_that_document(world, handbook, tmp_path):
    other = ingest(world.alice, world.docs, tmp_path, "other.md",
                   "# Benefits\n\n## Parental leave\n\nThe company adds a gift basket for every newborn.\n")
    body = navigate(api_client(world.alice_key), "parental leave", filters={"document_id": [other.pk]})
    assert body["chunks"] and {c["sources"][0]["document_id"] for c in body["chunks"]} == {other.pk}


def test_a_metadata_filter_reaches_past_sections_it_leaves_out(world, tmp_path):
    # Four newer documents hold the best "Parental leave" sections, all filtered out by their metadata:
    # the answer must come from the one document the filter lets through, not be empty.
    kept = ingest(world.alice, world.docs, tmp_path, "kept.md", "# Benefits\n\n## Leave\n\nA gift basket per newborn.\n",
                  metadata={"team": "b"})
    for i in range(4):
        ingest(world.alice, world.docs, tmp_path, f"other-{i}.md",
               f"# Policy {i}\n\n## Parental leave\n\nParental leave: {10 + i} weeks of parental leave.\n",
               metadata={"team": "a"})
    body = navigate(api_client(world.alice_key), "parental leave", filters={"metadata": {"team": "b"}})
    assert [c["sources"][0]["document_id"] for c in body["chunks"]] == [kept.pk]


@pytest.mark.parametrize("body, reason", [
    ({"query": "leave", "method": "navigate", "top_k": 0}, "top_k"),
    ({"query": "leave", "method": "navigate", "filters": {"document_id": ["x"]}}, "document_id"),
    ({"query": "leave", "method": "navigate", "filters": {"kb": ["secret"]}}, "secret"),
    ({"query": "leave", "method": "navigates"}, "navigate"),
])
def test_bad_input_is_refused_with_a_reason(world, body, reason):
    response = api_client(world.alice_key).post("/api/v1/memories/search", body, format="json")
    assert response.status_code == 400
    assert reason in response.content.decode()


def test_the_tree_follows_the_document_through_a_rerun_and_a_delete(world, handbook, tmp_path):
    scope = permitted_scope(world.alice, write=True)
    before = [s.first_chunk_id for s in document_tree(handbook)[0].children]
    rerun_document(scope, handbook)
    run_inline(handbook.pk)
    after = [s.first_chunk_id for s in document_tree(handbook)[0].children]
    assert len(after) == 3 and not set(before) & set(after)  # rebuilt from the new chunks
    delete_document(scope, handbook)
    assert not Chunk.objects.filter(document_id=handbook.pk).exists()
    assert navigate(api_client(world.alice_key), "parental leave")["chunks"] == []


def test_the_console_shows_the_contents_with_links_to_each_section(world, handbook):
    client = api_client(user=world.alice)
    page = client.get(f"/documents/{handbook.pk}/").content.decode()
    assert 'id="toc-title">Contents</h2>' in page
    contents = page[page.index('class="toc card"'):page.index('id="structure-title"')]
    for title in ("Staff handbook", "Parental leave", "Travel expenses", "Remote work", "Equipment"):
        assert f">{title}</a>" in contents
    [equipment] = [c for c in Chunk.objects.filter(document=handbook, level="parent") if c.section_path[-1] == "Equipment"]
    assert f"?chunk={equipment.pk}#chunk-{equipment.pk}" in contents
    assert f'id="chunk-{equipment.pk}"' in page  # the link lands on the section's card
    # nested: "Equipment" is listed inside "Remote work"'s list
    remote_at = contents.index(">Remote work</a>")
    assert contents.index('<ol class="toc-list">', remote_at) < contents.index(">Equipment</a>")
    # another tenant's user cannot open it
    assert api_client(user=world.charlie).get(f"/documents/{handbook.pk}/").status_code == 404


def test_the_console_search_offers_navigate_and_shows_its_chunks(world, handbook):
    client = api_client(user=world.alice)
    page = client.get("/search/", {"q": "How does parental leave work?", "method": "navigate", "kb": "docs"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'value="navigate"' in html and "twenty weeks" in html


def test_a_long_contents_panel_says_how_many_sections_it_leaves_out(world, handbook):
    from console.documents import MAX_TOC_ENTRIES

    Chunk.objects.bulk_create(Chunk(document=handbook, level="parent", ordinal=100 + i, text=f"Sheet {i}\n\nrow",
                                    section_path=[f"Sheet {i}"]) for i in range(MAX_TOC_ENTRIES + 20))
    page = api_client(user=world.alice).get(f"/documents/{handbook.pk}/").content.decode()
    contents = page[page.index('class="toc card"'):page.index('id="structure-title"')]
    total = 5 + MAX_TOC_ENTRIES + 20
    assert f"{total} sections" in contents
    assert contents.count("<li>") == MAX_TOC_ENTRIES
    assert f"and {total - MAX_TOC_ENTRIES} more sections" in contents
