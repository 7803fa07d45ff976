"""``FakeForge``'s extras beyond the contract, which unit tests of the publisher rely on."""

from __future__ import annotations

import pytest

from controller.forge.base import ForgeError, ForgeRateLimited
from tests.forge.fakes import FakeForge, fake_sha

REPO = "alice/demo"


@pytest.fixture
def fake() -> FakeForge:
    forge = FakeForge()
    forge.add_repo(REPO)
    forge.set_branch(REPO, "crucible/r1", fake_sha("r1"))
    return forge


def create(fake: FakeForge, head: str = "alice:crucible/r1") -> int:
    return fake.create_pull(REPO, head=head, base="main", title="t", body="b").number


def test_scripted_failures_before_and_after_the_write(fake: FakeForge) -> None:
    fake.fail_next("create_pull", ForgeRateLimited("slow down", 5))
    with pytest.raises(ForgeRateLimited):
        create(fake)
    assert fake.pull_infos(REPO) == []
    fake.fail_next("create_pull", ForgeError("502 after the write"), after=True)
    with pytest.raises(ForgeError):
        create(fake)
    assert [p.number for p in fake.pull_infos(REPO)] == [1]
    assert create(fake) == 1
    assert [c[0] for c in fake.calls] == ["create_pull"] * 3


def test_people_around_the_pull(fake: FakeForge) -> None:
    number = create(fake)
    fake.edit_body(REPO, number, "a person wrote this")
    fake.merge_pull(REPO, number)
    info = fake.get_pull(REPO, number)
    assert (info.body, info.state, info.merged) == ("a person wrote this", "closed", True)


def test_a_pull_from_a_fork(fake: FakeForge) -> None:
    fake.add_repo("bob/demo")
    fake.set_branch("bob/demo", "crucible/r1", fake_sha("fork"))
    number = create(fake, "bob:crucible/r1")
    assert fake.get_pull(REPO, number).head_sha == fake_sha("fork")
    fake.set_branch("bob/demo", "crucible/r1", fake_sha("fork 2"))
    assert fake.get_pull(REPO, number).head_sha == fake_sha("fork 2")
    assert fake.find_pull(REPO, "alice:crucible/r1") is None
    with pytest.raises(ForgeError):
        create(fake, "carol:crucible/r1")
