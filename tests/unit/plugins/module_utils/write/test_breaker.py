"""The breaker: the share per pool holds over models and user labels, in the order given."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.kubegpu.scheduling.plugins.module_utils.kube.errors import OptionError
from ansible_collections.kubegpu.scheduling.plugins.module_utils.write.breaker import (
    Candidate,
    Pool,
    apply_breaker,
    check_share,
    count_pools,
    pool_limit,
)

A100 = ("model", "nvidia-a100")
T4 = ("model", "tesla-t4")
TRAIN = ("node-pool", "train")


def test_allows_up_to_the_share_and_holds_the_rest_with_the_pool_named():
    pools = {A100: Pool(32)}
    candidates = [Candidate(f"n{i}", 8, (A100,)) for i in range(4)]
    verdict = apply_breaker(pools, candidates, 0.5)
    assert verdict.allowed == ("n0", "n1")
    assert [h.name for h in verdict.held] == ["n2", "n3"]
    assert verdict.held[0].pool == A100
    assert "model=nvidia-a100" in verdict.held[0].reason
    assert "24 of its 32 GPUs" in verdict.held[0].reason
    assert "at most 16" in verdict.held[0].reason
    assert verdict.used[A100] == 16


def test_gpus_already_quarantined_count_against_the_share():
    verdict = apply_breaker({A100: Pool(32, quarantined=16)}, [Candidate("n0", 8, (A100,))], 0.5)
    assert verdict.allowed == ()
    assert "16 already" in verdict.held[0].reason


def test_every_pool_of_a_candidate_must_have_room():
    pools = {A100: Pool(64), TRAIN: Pool(16)}
    candidates = [Candidate("a", 8, (A100, TRAIN)), Candidate("b", 8, (A100, TRAIN)), Candidate("c", 8, (A100,))]
    verdict = apply_breaker(pools, candidates, 0.5)
    assert verdict.allowed == ("a", "c")
    assert verdict.held[0].name == "b" and verdict.held[0].pool == TRAIN


def test_a_held_big_candidate_does_not_block_a_smaller_one_after_it():
    verdict = apply_breaker({T4: Pool(10)}, [Candidate("big", 8, (T4,)), Candidate("small", 2, (T4,))], 0.5)
    assert verdict.allowed == ("small",)


def test_a_pool_too_small_for_one_node_holds_it():
    verdict = apply_breaker({T4: Pool(8)}, [Candidate("only", 8, (T4,))], 0.5)
    assert verdict.allowed == () and verdict.limits[T4] == 4


def test_share_one_allows_the_whole_pool():
    verdict = apply_breaker({T4: Pool(16)}, [Candidate("a", 8, (T4,)), Candidate("b", 8, (T4,))], 1)
    assert verdict.allowed == ("a", "b")


def test_float_rounding_does_not_lose_a_gpu():
    assert pool_limit(Pool(10), 0.3) == 3
    assert pool_limit(Pool(3), 1 / 3) == 1


@pytest.mark.parametrize("share", [0, -0.1, 1.5, "half", None, True])
def test_a_bad_share_is_an_option_error_naming_the_option(share):
    with pytest.raises(OptionError, match="breaker_max_share"):
        check_share(share, "breaker_max_share")


def test_a_candidate_in_an_unknown_pool_is_refused():
    with pytest.raises(ValueError, match="model=tesla-t4"):
        apply_breaker({A100: Pool(8)}, [Candidate("x", 1, (T4,))], 0.5)


def test_count_pools_adds_members_once_per_pool():
    pools = count_pools([((A100, TRAIN), 8, False), ((A100, A100), 8, True), ((T4,), 4, False)])
    assert pools == {A100: Pool(16, 8), T4: Pool(4, 0), TRAIN: Pool(8, 0)}


@given(
    st.lists(st.integers(min_value=0, max_value=8), min_size=1, max_size=20),
    st.integers(min_value=0, max_value=40),
    st.sampled_from([0.1, 0.25, 0.5, 0.75, 1.0]),
)
def test_the_share_is_never_exceeded(sizes, already, share):
    total = sum(sizes) + already
    pools = {A100: Pool(total, already)}
    verdict = apply_breaker(pools, [Candidate(f"n{i}", g, (A100,)) for i, g in enumerate(sizes)], share)
    taken = sum(sizes[int(name[1:])] for name in verdict.allowed)
    assert already + taken <= max(pool_limit(pools[A100], share), already)
    assert len(verdict.allowed) + len(verdict.held) == len(sizes)
