use super::agreement::one_way;
use super::*;
use crate::canary::books::Books;
use crate::logprobs::{Position, Token};

/// A position where `word` led its runner-up by `lead` nats.
fn sure(word: &str, logprob: f64, lead: f64) -> Position {
    Position {
        token: Token::new(word, None),
        logprob: Some(logprob),
        top: vec![
            (Token::new(word, None), logprob),
            (Token::new(" runner-up", None), logprob - lead),
        ],
    }
}

fn of(positions: Vec<Position>) -> Arc<Reference> {
    Arc::new(Reference {
        text: positions.iter().map(|p| p.token.text.as_str()).collect(),
        positions,
        finish_reason: Some("length".into()),
    })
}

/// An answer of sure tokens (each leads its runner-up by 5 nats).
fn answer(words: &[&str]) -> Arc<Reference> {
    of(words.iter().map(|w| sure(w, -0.01, 5.0)).collect())
}

/// The same tokens, every logprob moved by `by` nats (drift, no flip).
fn drifted(words: &[&str], by: f64) -> Arc<Reference> {
    of(words.iter().map(|w| sure(w, -0.01 - by, 5.0)).collect())
}

const P: &str = "The capital of France is";

#[test]
fn the_majority_of_four_is_the_reference_and_the_odd_one_is_not() {
    let book = Arc::new(Book::default());
    let members: Vec<Member> = (0..4).map(|i| book.join(&format!("r{i}"))).collect();
    let good = answer(&[" a", " b", " c"]);
    let bad = answer(&[" a", " x", " c"]);
    // The odd one answers first: one of four agrees with it, no majority yet.
    assert_eq!(
        book.observe(&members[3], P, Arc::clone(&bad), 1.0).ok(),
        None
    );
    assert_eq!(
        book.observe(&members[0], P, Arc::clone(&good), 1.0).ok(),
        None
    );
    let reference = book.observe(&members[1], P, Arc::clone(&good), 1.0).ok();
    assert_eq!(reference, None, "two of four is not more than half");
    let reference = book
        .observe(&members[2], P, Arc::clone(&good), 1.0)
        .unwrap();
    assert_eq!(reference, good);
    // The next time the odd one answers, the majority is the reference it is compared with.
    assert_eq!(book.observe(&members[3], P, bad, 1.0).ok(), Some(good));
}

#[test]
fn below_three_replicas_the_first_answer_is_the_reference() {
    let book = Arc::new(Book::default());
    let a = book.join("a");
    let first = answer(&[" a"]);
    assert_eq!(
        book.observe(&a, P, Arc::clone(&first), 1.0).ok(),
        Some(Arc::clone(&first))
    );
    assert_eq!(
        book.observe(&a, P, answer(&[" z"]), 1.0).ok(),
        Some(first),
        "kept"
    );
    assert_eq!(
        book.observe(&a, "another prompt", answer(&[" q"]), 1.0)
            .ok(),
        Some(answer(&[" q"])),
        "per prompt"
    );
}

/// Item 2: the reference was keyed by the prompt's index and never cleared, so an edited
/// prompts file compared the new prompt 0 with the old one's answer until a restart, and
/// a pool's full turnover kept the first answer of pods long gone.
#[test]
fn a_new_prompt_or_an_emptied_group_learns_a_fresh_reference() {
    let books = Books::default();
    let book = books.group("pool", None);
    let old_task = book.join("r0");
    let old = answer(&[" Paris"]);
    book.observe(&old_task, "The capital of France is", Arc::clone(&old), 1.0)
        .ok();
    // Reload with an edited prompts file: the new task joins while the old one still runs.
    let new_task = book.join("r0");
    let new = answer(&[" Berlin"]);
    assert_eq!(
        book.observe(
            &new_task,
            "The capital of Germany is",
            Arc::clone(&new),
            1.0
        )
        .ok(),
        Some(Arc::clone(&new)),
        "a new prompt is never compared with an old prompt's answer"
    );
    drop((old_task, new_task));
    // Every replica left (a full turnover): the next replica's first answer is the reference.
    let book = books.group("pool", None);
    let next = book.join("r9");
    let today = answer(&[" Paris", " today"]);
    assert_eq!(
        book.observe(&next, "The capital of France is", Arc::clone(&today), 1.0)
            .ok(),
        Some(today)
    );
}

#[test]
fn a_changed_model_or_setting_is_another_book() {
    let spec = |max_tokens| CanarySpec {
        unread: None,
        interval: std::time::Duration::from_secs(60),
        max_tokens,
        structured_max_tokens: 512,
        top_logprobs: 5,
        margin: 1.0,
        prompts: Vec::new().into(),
        golden: None,
        golden_for: None,
        group_by: Vec::new(),
        baseline: None,
        votes: 3,
        warmup: 0,
        max_divergence: 0.1,
    };
    let key = group_key("pool", "m", &spec(32));
    assert_ne!(key, group_key("pool", "m2", &spec(32)));
    assert_ne!(key, group_key("pool", "m", &spec(16)));
    assert_ne!(key, group_key("other", "m", &spec(32)));
    assert_eq!(key, group_key("pool", "m", &spec(32)));
    let books = Books::default();
    assert!(!Arc::ptr_eq(
        &books.group(&key, Some("v1")),
        &books.group(&key, Some("v2"))
    ));
}

/// Item 3: the majority could be the scored replica's own answer, whose drift from itself
/// is 0: the drifting replica showed none, and its healthy peers showed its drift.
#[test]
fn a_replica_is_never_its_own_reference_and_drift_lands_on_the_drifter() {
    let book = Arc::new(Book::default());
    let members: Vec<Member> = (0..3).map(|i| book.join(&format!("r{i}"))).collect();
    let words = [" a", " b", " c"];
    let drifting = drifted(&words, 0.4);
    book.observe(&members[1], P, answer(&words), 1.0).ok();
    book.observe(&members[2], P, answer(&words), 1.0).ok();
    let reference = book
        .observe(&members[0], P, Arc::clone(&drifting), 1.0)
        .unwrap();
    assert!(!Arc::ptr_eq(&reference, &drifting), "its own answer");
    let drift = |r: &Reference, a: &Reference| one_way(r, a, 1.0).unwrap();
    assert!((drift(&reference, &drifting) - 0.4).abs() < 1e-9);
    // The healthy ones are compared with each other, not with the drifter.
    for healthy in [1, 2] {
        let mine = answer(&words);
        let reference = book
            .observe(&members[healthy], P, Arc::clone(&mine), 1.0)
            .unwrap();
        assert!(!Arc::ptr_eq(&reference, &mine));
        assert!(drift(&reference, &mine) < 1e-9, "r{healthy} blamed");
    }
}

/// Issue 25, item 1: agreement counted from the candidate's side let an answer that
/// hesitates everywhere agree with every other and become the reference. Four replicas:
/// two right and sure, one right but unsure (low margins, same tokens), one flattened and
/// corrupting (a wrong token it reports beside the right one as a near tie).
#[test]
fn a_hesitant_or_flattened_replica_never_becomes_the_reference() {
    let words = [" a", " b", " c", " d"];
    let right = || answer(&words);
    let unsure = of(words.iter().map(|w| sure(w, -0.6, 0.3)).collect());
    let flattened = {
        let mut positions: Vec<Position> = words.iter().map(|w| sure(w, -0.7, 0.02)).collect();
        // Position 1: " x" where the others are sure of " b", with " b" a near tie.
        positions[1] = Position {
            token: Token::new(" x", None),
            logprob: Some(-0.70),
            top: vec![
                (Token::new(" x", None), -0.70),
                (Token::new(" b", None), -0.71),
            ],
        };
        of(positions)
    };
    for order in [[0, 1, 2, 3], [3, 2, 1, 0], [2, 3, 0, 1]] {
        let book = Arc::new(Book::default());
        let members: Vec<Member> = (0..4).map(|i| book.join(&format!("r{i}"))).collect();
        let answers = [
            right(),
            right(),
            Arc::clone(&unsure),
            Arc::clone(&flattened),
        ];
        let mut last = None;
        for &i in &order {
            last = book
                .observe(&members[i], P, Arc::clone(&answers[i]), 1.0)
                .ok();
        }
        let _ = last;
        // The flattened replica is compared with a sure answer, and diverges from it.
        let reference = book
            .observe(&members[3], P, Arc::clone(&flattened), 1.0)
            .expect("three of four agree");
        assert!(
            !Arc::ptr_eq(&reference, &flattened),
            "order {order:?}: the flattened answer is no reference"
        );
        assert!(
            one_way(&reference, &flattened, 1.0).is_none(),
            "order {order:?}: the corrupt token passed: reference {reference:?}"
        );
        // The unsure one agrees with the sure ones both ways, and is compared with one.
        let reference = book
            .observe(&members[2], P, Arc::clone(&unsure), 1.0)
            .unwrap();
        assert_eq!(reference.positions, right().positions, "order {order:?}");
    }
}

/// Item 10: every check compared the new answer's candidates with every answer, O(n²).
/// Now each new answer is compared once each way with the others, and the rest is cached.
#[test]
fn a_check_costs_comparisons_linear_in_the_group() {
    let book = Arc::new(Book::default());
    let n = 200;
    let members: Vec<Member> = (0..n).map(|i| book.join(&format!("r{i}"))).collect();
    let good = answer(&[" a", " b", " c"]);
    for m in &members {
        book.observe(m, P, Arc::clone(&good), 1.0).ok();
    }
    let before = book.comparisons();
    let reference = book
        .observe(&members[7], P, answer(&[" a", " x", " c"]), 1.0)
        .ok();
    assert_eq!(reference, Some(good));
    assert_eq!(book.comparisons() - before, 2 * (n as u64 - 1));
}

#[test]
fn replicas_leave_with_their_answers() {
    let books = Books::default();
    let book = books.group("pool", None);
    let members: Vec<Member> = (0..3).map(|i| book.join(&format!("r{i}"))).collect();
    for m in &members {
        book.observe(m, P, answer(&[" a"]), 1.0).ok();
    }
    assert_eq!(book.lock().answers[P].len(), 3);
    let restarted = book.join("r0"); // a restart: the new task joins before the old leaves
    drop(members);
    assert_eq!(book.lock().replicas.len(), 1);
    assert_eq!(book.lock().answers[P].len(), 1, "r0 is still there");
    assert!(
        book.lock().answers[P]["r0"].agrees.is_empty(),
        "agreements with replicas gone are gone"
    );
    drop(restarted);
    assert!(
        book.lock().answers.is_empty(),
        "r0's answer went with its last task"
    );
    drop(book);
    let _other = books.group("other", None);
    assert_eq!(books.group_count(), 1, "the empty group was forgotten");
}

/// Issue 41, item 4: the groups here, oldest first (by their oldest pod's creation, not by
/// the order this process joined them), and a group's reference as another group's
/// replica sees it, which records nothing of that replica.
#[test]
fn the_groups_here_are_listed_oldest_first_and_answer_for_others() {
    let books = Books::default();
    let new = books.group("pool", Some("new"));
    let _n = new.join_at("llm-a", Some(2_000), None);
    std::thread::sleep(std::time::Duration::from_millis(2));
    let old = books.group("pool", Some("old"));
    let members: Vec<Member> = (0..3)
        .map(|i| old.join_at(&format!("llm-b{i}"), Some(1_000 + i), None))
        .collect();
    let good = answer(&[" a", " b"]);
    for m in &members {
        old.observe(m, P, Arc::clone(&good), 1.0).ok();
    }
    let groups: Vec<_> = books
        .groups_here("pool")
        .into_iter()
        .map(|(g, _)| g)
        .collect();
    assert_eq!(groups, [Some("old".to_owned()), Some("new".to_owned())]);
    let found = books.live("pool", Some("old")).unwrap();
    assert_eq!(found.reference_for_others(P), Some(Arc::clone(&good)));
    assert_eq!(found.lock().answers[P].len(), 3, "nothing recorded");
    assert!(books.groups_here("other").is_empty());
    drop(members);
    let groups: Vec<_> = books
        .groups_here("pool")
        .into_iter()
        .map(|(g, _)| g)
        .collect();
    assert_eq!(groups, [Some("new".to_owned())], "a group gone is no group");
}

/// Item 5: a baseline group with no replica here answers by its voters alone: one voter's
/// answer, the majority of three, and none where two disagree.
#[test]
fn a_remote_baseline_answers_by_its_votes() {
    let books = Books::default();
    let remote = books.remote("pool", Some("old"), &[]);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let (good, bad) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    assert_eq!(remote.reference_for_others(P), None, "no vote yet");
    remote.vote("n1", P, Arc::clone(&good), 1.0, until, None);
    assert_eq!(remote.reference_for_others(P), Some(Arc::clone(&good)));
    remote.vote("n2", P, Arc::clone(&bad), 1.0, until, None);
    assert_eq!(
        remote.reference_for_others(P),
        None,
        "two disagree: no verdict"
    );
    remote.vote("n3", P, Arc::clone(&good), 1.0, until, None);
    assert_eq!(remote.reference_for_others(P), Some(Arc::clone(&good)));
    // Another group has its own; one no longer compared with is dropped.
    let other = books.remote("pool", Some("older"), &[Some("old".into())]);
    assert_eq!(other.reference_for_others(P), None);
    assert!(books.remote_existing("pool", Some("old")).is_some());
    books.remote("pool", Some("older"), &[]);
    assert!(books.remote_existing("pool", Some("old")).is_none());
}

/// Issue 31, item 9: below three replicas the group's first answer stayed its reference
/// after its author was replaced, so a healthy survivor diverged from a broken pod's answer
/// of days ago. Now an answer whose author left is forgotten, and two replicas that
/// disagree leave the check unscored, saying why.
#[test]
fn below_three_no_answer_outlives_its_author_and_two_that_disagree_are_unscored() {
    let book = Arc::new(Book::default());
    let (good, broken) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    let a = book.join("a"); // loaded the wrong weights, answers first
    assert_eq!(
        book.observe(&a, P, Arc::clone(&broken), 1.0),
        Ok(Arc::clone(&broken))
    );
    let b = book.join("b");
    assert_eq!(
        book.observe(&b, P, Arc::clone(&good), 1.0),
        Err(NoReference::TwoDisagree),
        "two that disagree: nothing tells which is right"
    );
    assert!(NoReference::TwoDisagree.note().contains("disagree"));
    drop(a); // the broken pod is replaced
    assert_eq!(
        book.observe(&b, P, Arc::clone(&good), 1.0),
        Ok(Arc::clone(&good)),
        "the survivor is not judged by the broken pod's answer"
    );
    let c = book.join("c"); // its replacement, healthy
    assert_eq!(
        book.observe(&c, P, Arc::clone(&good), 1.0),
        Ok(Arc::clone(&good))
    );
    assert_eq!(book.reference_for_others(P), Some(good));
    drop((b, c));
}

/// Item 9: a group that shrinks below three keeps the last answer its majority agreed
/// with, so a replica going wrong after a scale-down is still caught.
#[test]
fn below_three_the_last_majority_answer_is_the_reference() {
    let book = Arc::new(Book::default());
    let members: Vec<Member> = (0..3).map(|i| book.join(&format!("r{i}"))).collect();
    let (good, bad) = (answer(&[" a", " b"]), answer(&[" x", " y"]));
    for m in &members {
        book.observe(m, P, Arc::clone(&good), 1.0).ok();
    }
    let mut members = members.into_iter();
    let (first, second) = (members.next().unwrap(), members.next().unwrap());
    drop(members); // scaled down to two
    assert_eq!(
        book.observe(&first, P, Arc::clone(&bad), 1.0),
        Ok(Arc::clone(&good))
    );
    assert_eq!(
        book.observe(&second, P, Arc::clone(&good), 1.0),
        Ok(Arc::clone(&good))
    );
    assert_eq!(book.reference_for_others(P), Some(good));
}

#[path = "lineage_tests.rs"]
mod lineage;
