use std::path::Path;

use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;

fn tokenizer() -> Arc<TokenCounter> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer/tiny-bpe.json");
    Arc::new(TokenCounter::load(&path).unwrap())
}

fn synthetic(input_tokens: u32, prefix: u32, counter: Option<Arc<TokenCounter>>) -> PromptSource {
    let exact = counter
        .as_deref()
        .map(|c| synthetic::ExactFiller::new(c, input_tokens * 2).unwrap());
    PromptSource {
        structure: None,
        input: Input::Synthetic {
            input_tokens,
            shared_prefix: synthetic::shared_prefix(prefix, counter.as_deref()).unwrap(),
            exact,
        },
        output_tokens: 64,
        range_ratio: 0.0,
        models: vec!["m".into()],
        tokenizer: counter,
        media: Vec::new(),
    }
}

#[test]
fn a_tokenizer_gives_exact_prompt_lengths() {
    let counter = tokenizer();
    let source = synthetic(100, 0, Some(Arc::clone(&counter)));
    let mut rng = StdRng::seed_from_u64(1);
    for _ in 0..50 {
        let prompt = source.next(&mut rng);
        assert_eq!((prompt.input_tokens, prompt.input_exact), (100, true));
        assert_eq!(counter.count(&prompt.text), Some(100), "{}", prompt.text);
    }
}

#[test]
fn shared_prefixes_are_shared_and_then_unique() {
    let counter = tokenizer();
    let source = synthetic(120, 40, Some(Arc::clone(&counter)));
    let mut rng = StdRng::seed_from_u64(2);
    let (a, b) = (source.next(&mut rng), source.next(&mut rng));
    let Input::Synthetic { shared_prefix, .. } = &source.input else {
        unreachable!()
    };
    assert_eq!(counter.count(shared_prefix), Some(40));
    assert!(
        a.text.starts_with(shared_prefix.as_str()) && b.text.starts_with(shared_prefix.as_str())
    );
    let tail = |p: &Prompt| p.text[shared_prefix.len()..].to_owned();
    assert_ne!(
        tail(&a)[..17],
        tail(&b)[..17],
        "a nonce right after the prefix"
    );
    assert_eq!((a.input_tokens, b.input_tokens), (120, 120));
    assert!(a.input_exact && b.input_exact);

    let approximate = synthetic(50, 10, None);
    let p = approximate.next(&mut rng);
    assert!(p.text.starts_with("you are a helpful assistant"));
    assert_eq!(
        p.text.split_whitespace().count(),
        10 + 1 + 40 - synthetic::NONCE_TOKENS as usize
    );
}

#[test]
fn range_ratio_spreads_lengths_like_vllm() {
    let mut source = synthetic(100, 0, None);
    source.range_ratio = 0.5;
    let mut rng = StdRng::seed_from_u64(3);
    let lens: Vec<u32> = (0..2000)
        .map(|_| source.next(&mut rng).max_tokens)
        .collect();
    assert!(
        lens.iter().all(|&l| (32..=96).contains(&l)),
        "output in [64·0.5, 64·1.5]"
    );
    assert!(
        lens.contains(&32) && lens.contains(&96),
        "both ends reachable"
    );
    let mean = lens.iter().map(|&l| f64::from(l)).sum::<f64>() / lens.len() as f64;
    assert!((mean - 64.0).abs() < 1.5, "{mean}");
    for _ in 0..100 {
        assert!(
            (1..=2).contains(&sample_len(1, 0.9, 1, &mut rng)),
            "never below one token"
        );
    }
}

#[test]
fn models_are_drawn_uniformly() {
    let mut source = synthetic(10, 0, None);
    source.models = vec!["base".into(), "lora-a".into(), "lora-b".into()];
    let mut rng = StdRng::seed_from_u64(4);
    let mut counts = std::collections::HashMap::new();
    for _ in 0..3000 {
        *counts.entry(source.next(&mut rng).model).or_insert(0) += 1;
    }
    assert_eq!(counts.len(), 3);
    assert!(
        counts.values().all(|&n| (900..=1100).contains(&n)),
        "{counts:?}"
    );
}

#[test]
fn dataset_prompts_get_a_nonce_and_their_output_length() {
    let dataset = Arc::new(Dataset {
        entries: vec![Entry {
            prompt: "what is a probe".into(),
            output_tokens: Some(7),
        }],
    });
    let mut source = synthetic(10, 0, Some(tokenizer()));
    source.input = Input::Dataset {
        dataset: Arc::clone(&dataset),
        output_from_dataset: true,
    };
    let mut rng = StdRng::seed_from_u64(5);
    let p = source.next(&mut rng);
    assert!(
        p.text.ends_with(" what is a probe") && p.text.len() == 17 + 15,
        "{}",
        p.text
    );
    assert_eq!(p.max_tokens, 7);
    assert!(p.input_exact);
    assert_eq!(
        Some(u64::from(p.input_tokens)),
        source.tokenizer.as_ref().unwrap().count(&p.text)
    );
    source.input = Input::Dataset {
        dataset,
        output_from_dataset: false,
    };
    assert_eq!(source.next(&mut rng).max_tokens, 64);
}
