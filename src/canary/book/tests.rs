use super::*;
use crate::logprobs::{Position, Token};

/// An answer of sure tokens (each leads its runner-up by 5 nats).
fn answer(words: &[&str]) -> Arc<Reference> {
    let positions = words
        .iter()
        .map(|w| Position {
            token: Token::new(w, None),
            logprob: Some(-0.01),
            top: vec![
                (Token::new(w, None), -0.01),
                (Token::new(" runner-up", None), -5.0),
            ],
        })
        .collect();
    Arc::new(Reference {
        text: words.concat(),
        positions,
        finish_reason: Some("length".into()),
    })
}

#[test]
fn the_majority_of_four_is_the_reference_and_the_odd_one_is_not() {
    let book = Arc::new(Book::default());
    let members: Vec<Member> = (0..4).map(|i| book.join(&format!("r{i}"))).collect();
    let good = answer(&[" a", " b", " c"]);
    let bad = answer(&[" a", " x", " c"]);
    // The odd one answers first: one of four agrees with it, no majority yet.
    assert_eq!(book.observe(&members[3], 0, Arc::clone(&bad), 1.0), None);
    assert_eq!(book.observe(&members[0], 0, Arc::clone(&good), 1.0), None);
    let reference = book.observe(&members[1], 0, Arc::clone(&good), 1.0);
    assert_eq!(reference, None, "two of four is not more than half");
    let reference = book
        .observe(&members[2], 0, Arc::clone(&good), 1.0)
        .unwrap();
    assert_eq!(reference, good);
    // The next time the odd one answers, the majority is the reference it is compared with.
    assert_eq!(book.observe(&members[3], 0, bad, 1.0), Some(good));
}

#[test]
fn below_three_replicas_the_first_answer_is_the_reference() {
    let book = Arc::new(Book::default());
    let a = book.join("a");
    let first = answer(&[" a"]);
    assert_eq!(
        book.observe(&a, 0, Arc::clone(&first), 1.0),
        Some(Arc::clone(&first))
    );
    assert_eq!(
        book.observe(&a, 0, answer(&[" z"]), 1.0),
        Some(first),
        "kept"
    );
    assert_eq!(
        book.observe(&a, 1, answer(&[" q"]), 1.0),
        Some(answer(&[" q"])),
        "per prompt"
    );
}

#[test]
fn replicas_leave_with_their_answers() {
    let books = Books::default();
    let book = books.group("pool");
    let members: Vec<Member> = (0..3).map(|i| book.join(&format!("r{i}"))).collect();
    for m in &members {
        book.observe(m, 0, answer(&[" a"]), 1.0);
    }
    assert_eq!(book.lock().answers[&0].len(), 3);
    let restarted = book.join("r0"); // a restart: the new task joins before the old leaves
    drop(members);
    assert_eq!(book.lock().replicas.len(), 1);
    assert_eq!(book.lock().answers[&0].len(), 1, "r0 is still there");
    drop(restarted);
    assert!(
        book.lock().answers[&0].is_empty(),
        "r0's answer went with its last task"
    );
    drop(book);
    let _other = books.group("other");
    assert_eq!(
        books.groups.lock().unwrap().len(),
        1,
        "the empty group was forgotten"
    );
}
