"""Entity and profile pages in the console shell: what a member may read, nothing of another tenant."""

from django.test import Client

from entities.models import Entity, EntityAlias, EntityMention
from memory.models import Memory


def client_for(user):
    client = Client()
    client.force_login(user)
    return client


def named_memory(world, kb, text, surface, name="Wang Fang", **fields):
    memory = Memory.objects.create(tenant=kb.tenant, kb=kb, kind=Memory.Kind.ATOMIC_FACT, text=text, **fields)
    entity, _ = Entity.objects.get_or_create(tenant=kb.tenant, type="person", key=name.casefold(),
                                             defaults={"name": name})
    EntityAlias.objects.get_or_create(entity=entity, tenant=kb.tenant, key=surface.casefold(),
                                      defaults={"surface": surface})
    EntityMention.objects.create(entity=entity, memory=memory, tenant=kb.tenant, kb=kb, surface=surface)
    return entity


def test_the_entity_list_and_page_show_aliases_and_the_memories_naming_it(world):
    entity = named_memory(world, world.docs, "Wang Fang owns the budget.", "Wang Fang")
    named_memory(world, world.docs, "Fang approved the launch.", "Fang")
    listing = client_for(world.alice).get("/entities/").content.decode()
    assert f'href="/entities/{entity.pk}/"' in listing and "Wang Fang" in listing
    assert "Wang Fang" not in client_for(world.alice).get("/entities/?type=place").content.decode()
    page = client_for(world.alice).get(f"/entities/{entity.pk}/").content.decode()
    assert "Fang, Wang Fang" in page
    assert "Wang Fang owns the budget." in page and "Fang approved the launch." in page


def test_another_tenant_gets_404_for_the_entity_and_the_profile(world):
    entity = named_memory(world, world.docs, "Wang Fang owns the budget.", "Wang Fang")
    Memory.objects.create(tenant=world.acme, kb=world.docs, kind=Memory.Kind.PROFILE, user_id="u1",
                          text="Caroline likes hiking.", metadata={"subject": "Caroline", "category": "hobby",
                                                                   "value": "hiking"})
    assert client_for(world.charlie).get(f"/entities/{entity.pk}/").status_code == 404
    assert client_for(world.charlie).get("/profiles/u1/").status_code == 404
    assert "Wang Fang" not in client_for(world.charlie).get("/entities/").content.decode()
    page = client_for(world.alice).get("/profiles/u1/").content.decode()
    assert "Caroline" in page and "hiking" in page and "Profile of u1" in page
    assert 'href="/profiles/u1/"' in client_for(world.alice).get("/entities/").content.decode()


def test_the_entity_page_lists_the_agent_cases_and_skills_linked_to_it(world, committed):
    """Three hotel bookings in Lisbon by one agent: each a case naming Lisbon, two successes a skill; the
    Lisbon page lists the cases (outcome, quality) and the skill (maturity) with links to their history."""
    from datetime import timedelta

    from tests.conftest import api_client
    from tests.test_agent_cases import T0, booking, transcript

    client = api_client(world.alice_key)
    for i, (hotel, ok) in enumerate([("Hotel Avenida", True), ("Casa Alfama", True), ("Pensao Rosa", False)]):
        transcript(client, committed, f"trip{i}", booking("Lisbon", hotel, ok), agent="travel-bot",
                   start=T0 + timedelta(days=i))
    cases = list(Memory.objects.filter(kind=Memory.Kind.AGENT_CASE))
    (skill,) = Memory.objects.filter(kind=Memory.Kind.AGENT_SKILL)
    assert len(cases) == 3
    lisbon = Entity.objects.get(tenant=world.acme, key="lisbon")
    page = client_for(world.alice).get(f"/entities/{lisbon.pk}/").content.decode()
    assert "Agent cases and skills" in page
    for case in cases:
        assert f'href="/memories/{case.pk}/history/"' in page
    assert f'href="/memories/{skill.pk}/history/"' in page and "maturity" in page
    assert "success" in page and "failure" in page
    assert client_for(world.charlie).get(f"/entities/{lisbon.pk}/").status_code == 404
