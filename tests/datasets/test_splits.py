from towers.datasets.splits import cold_start_split, question_key


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


def test_case_and_punctuation_variants_are_one_question():
    assert question_key("How many copies of Animalia have been sold?") == question_key(
        "how many  copies of animalia have been sold") == "how many copies of animalia have been sold"
    queries = _queries(100)
    queries.update({"v1": "Who built the Tower?", "v2": "WHO BUILT THE TOWER", "v3": "who built the tower ?!"})
    for seed in range(20):
        parts = cold_start_split(queries, 0.5, 0.1, seed)
        assert len({q in parts["test"] for q in ("v1", "v2", "v3")}) == 1


def test_trained_keys_train_and_count_toward_the_share():
    queries = _queries(100)
    trained = frozenset(question_key(queries[q]) for q in ("q1", "q2", "q3"))
    for seed in range(20):
        parts = cold_start_split(queries, 0.3, 0.1, seed, trained)
        train = parts["train"] + parts["valid"]
        assert {"q1", "q2", "q3"} <= set(train) and len(train) == 30


def test_questions_sharing_an_answer_stay_on_one_side():
    # a chain: a shares a sentence with b, b another with c; d is answered by what the trained set was taught
    queries = _queries(100)
    queries.update({"a": "when was it lit", "b": "what year did the light start", "c": "who lit it first", "d": "how tall"})
    answers = {"a": {"s1"}, "b": {"s1", "s2"}, "c": {"s2"}, "d": {"s9"}, **{f"q{i}": {f"own{i}"} for i in range(100)}}
    for seed in range(20):
        parts = cold_start_split(queries, 0.5, 0.1, seed, answers=answers, trained_answers=frozenset({"s9"}))
        assert len({q in parts["test"] for q in ("a", "b", "c")}) == 1 and "d" not in parts["test"]
        assert sorted(parts["train"] + parts["valid"] + parts["test"]) == sorted(queries)
        taught = {doc for q in parts["train"] + parts["valid"] for doc in answers[q]}
        assert not any(answers[q] & taught for q in parts["test"])
    # without shared answers the split is the one without `answers`
    plain = {q: {f"own-{q}"} for q in queries}
    assert cold_start_split(queries, 0.5, 0.1, 3, answers=plain) == cold_start_split(queries, 0.5, 0.1, 3)

