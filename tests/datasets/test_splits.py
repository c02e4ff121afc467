from towers.datasets.splits import cold_start_split


def _queries(n):
    return {f"q{i}": f"question number {i}?" for i in range(n)}


def test_ratios_disjoint_and_complete():
    queries = _queries(1000)
    for fraction, train_size in [(0.01, 10), (0.05, 50), (0.8, 800)]:
        parts = cold_start_split(queries, fraction, 0.1, seed=13)
        train = parts["train"] + parts["valid"]
        assert len(train) == train_size
        assert len(parts["valid"]) == round(0.1 * train_size)
        assert set(train).isdisjoint(parts["test"])
        assert sorted(train + parts["test"]) == sorted(queries)


def test_seeded_and_repeatable():
    queries = _queries(200)
    assert cold_start_split(queries, 0.05, 0.1, 1) == cold_start_split(queries, 0.05, 0.1, 1)
    assert cold_start_split(queries, 0.05, 0.1, 1) != cold_start_split(queries, 0.05, 0.1, 2)


def test_identical_question_texts_stay_on_one_side():
    queries = _queries(100)
    queries.update({"dup1": "Who built it?", "dup2": "who  built it?", "dup3": "Who built it?"})
    for seed in range(20):
        parts = cold_start_split(queries, 0.5, 0.1, seed)
        sides = {side for side, qids in parts.items() for q in qids if q.startswith("dup")}
        assert len(sides - {"valid"} | ({"train"} if "valid" in sides else set())) == 1


def test_tiny_training_set_still_has_one_question():
    parts = cold_start_split(_queries(20), 0.01, 0.1, 0)
    assert len(parts["train"]) == 1 and parts["valid"] == []
