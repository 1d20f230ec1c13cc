//! The learned reference's cost per canary check: one replica's new answer recorded in a
//! group of n replicas that all answered (32 sure tokens each), and its reference picked.
//! Each check compares the answer with the group's others once each way: O(n).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use inferprobe::canary::book::Book;
use inferprobe::endpoint::canary::Reference;
use inferprobe::logprobs::{Position, Token};

fn answer(seed: usize) -> Arc<Reference> {
    let positions = (0..32)
        .map(|i| {
            let word = format!(" w{}", (i * 7 + seed) % 50);
            Position {
                token: Token::new(&word, None),
                logprob: Some(-0.01),
                top: (0..5)
                    .map(|k| {
                        (
                            Token::new(&format!("{word}{k}"), None),
                            -0.01 - 5.0 * k as f64,
                        )
                    })
                    .collect(),
            }
        })
        .collect();
    Arc::new(Reference {
        text: String::new(),
        positions,
        finish_reason: Some("length".into()),
    })
}

fn observe(c: &mut Criterion) {
    let mut group = c.benchmark_group("canary_book_observe");
    for n in [10usize, 100, 500] {
        let book = Arc::new(Book::default());
        let members: Vec<_> = (0..n).map(|i| book.join(&format!("r{i}"))).collect();
        let good = answer(0);
        for m in &members {
            let _ = book.observe(m, "p", Arc::clone(&good), 1.0);
        }
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % n;
                black_box(book.observe(&members[i], "p", Arc::clone(&good), 1.0))
            });
        });
    }
    group.finish();
}

criterion_group!(benches, observe);
criterion_main!(benches);
