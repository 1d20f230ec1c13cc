use serde_json::json;

use super::*;

#[test]
fn chat_logprobs_with_bytes_and_alternatives() {
    let value = json!({"content": [
        {"token": " Paris", "logprob": -0.01, "bytes": [32, 80, 97, 114, 105, 115],
         "top_logprobs": [
            {"token": " Lyon", "logprob": -5.2, "bytes": [32, 76, 121, 111, 110]},
            {"token": " Paris", "logprob": -0.01, "bytes": [32, 80, 97, 114, 105, 115]}]},
        {"token": "\\xe2", "logprob": -0.5, "bytes": [226], "top_logprobs": []}
    ]});
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].top[0].0.text, " Paris", "sorted best first");
    assert!((out[0].margin().unwrap() - 5.19).abs() < 1e-9);
    // A byte token is its bytes, whatever the server spells it as.
    assert!(
        out[1]
            .token
            .same(&Token::new("bytes:\\xe2", Some(vec![226])))
    );
    // No alternative listed: p = e^-0.5 = 0.61, so no other token has more than 0.39.
    let bound = -0.5 - (1.0 - (-0.5f64).exp()).ln();
    assert!((out[1].margin().unwrap() - bound).abs() < 1e-12);
    read(&json!(null), &mut out).unwrap();
    read(&json!({"content": null, "refusal": null}), &mut out).unwrap();
    assert_eq!(out.len(), 2, "null logprobs add nothing");
}

#[test]
fn completions_logprobs_sort_their_alternatives() {
    let value = json!({
        "tokens": [" a", " b"], "token_logprobs": [-0.1, -2.0],
        "top_logprobs": [{" z": -3.0, " a": -0.1}, {" b": -2.0, " c": -1.9}],
        "text_offset": [0, 2]
    });
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    assert_eq!(
        out[0]
            .top
            .iter()
            .map(|(t, _)| t.text.as_str())
            .collect::<Vec<_>>(),
        [" a", " z"]
    );
    assert!((out[0].margin().unwrap() - 2.9).abs() < 1e-9);
    // The chosen token trails an alternative (sampling, or a server's rounding): negative.
    assert!(out[1].margin().unwrap() < 0.0);
}

#[test]
fn malformed_logprobs_are_errors_not_panics() {
    for bad in [
        json!("x"),
        json!({"content": 3}),
        json!({"content": [{"logprob": -1.0}]}),
        json!({"content": [{"token": "a", "logprob": "high"}]}),
        json!({"content": [{"token": "a", "logprob": 2.5}]}),
        json!({"content": [{"token": "a", "bytes": [300]}]}),
        json!({"tokens": [1], "token_logprobs": [-1.0]}),
        json!({"tokens": "a"}),
    ] {
        assert!(read(&bad, &mut Vec::new()).is_err(), "{bad} accepted");
    }
    let many = json!({"tokens": vec![" a"; MAX_POSITIONS + 1]});
    assert!(read(&many, &mut Vec::new()).is_err());
}

/// vLLM's chat logprobs for a byte token: `"token": ""`, `"bytes": []`, and several such
/// among the alternatives, each a different token.
#[test]
fn opaque_tokens_are_told_apart_from_nothing_and_from_each_other() {
    let value = json!({"content": [
        {"token": "", "logprob": -5.00, "bytes": [], "top_logprobs": [
            {"token": "", "logprob": -5.00, "bytes": []},
            {"token": "", "logprob": -5.01, "bytes": []},
            {"token": "hat", "logprob": -5.20, "bytes": [104, 97, 116]}]},
        {"token": " and", "logprob": -1.0, "bytes": [32, 97, 110, 100], "top_logprobs": [
            {"token": " and", "logprob": -1.0, "bytes": [32, 97, 110, 100]},
            {"token": "", "logprob": -3.0, "bytes": []}]}
    ]});
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    assert!(out[0].token.is_opaque() && !out[1].token.is_opaque());
    // The other opaque alternative is another token: the lead is 0.01, not 0.2.
    assert!((out[0].margin().unwrap() - 0.01).abs() < 1e-9);
    assert!((out[1].margin().unwrap() - 2.0).abs() < 1e-9);
    let opaque = &out[0].token;
    assert_eq!(opaque.identity(opaque), Identity::Unknown);
    assert_eq!(opaque.identity(&out[1].token), Identity::Different);
    // A fragment another server spelled in bytes may be the same one.
    let fragment = Token::new("\\xe2", Some(vec![226]));
    assert_eq!(opaque.identity(&fragment), Identity::Unknown);
    assert_eq!(fragment.identity(&fragment), Identity::Same);
    assert!(Token::new("\u{fffd}", None).is_opaque());
}

/// The lead over a token the reference listed is exact; over one it did not, a bound; over
/// an opaque spelling, the least of what it may be (any opaque alternative, or unlisted).
#[test]
fn the_lead_over_another_token() {
    let opaque = || Token::new("", Some(Vec::new()));
    let position = Position {
        token: Token::new(" a", None),
        logprob: Some(-1.0),
        top: vec![
            (Token::new(" a", None), -1.0),
            (opaque(), -1.05),
            (Token::new(" b", None), -3.0),
        ],
    };
    let lead = |t: Token| position.lead_over(&t).unwrap();
    assert!((position.margin().unwrap() - 0.05).abs() < 1e-9);
    assert!((lead(Token::new(" b", None)) - 2.0).abs() < 1e-9);
    // Unlisted: no more than the least listed (−3.0; the mass left, 0.23, bounds less).
    assert!((lead(Token::new(" zebra", None)) - 2.0).abs() < 1e-9);
    assert!(
        (lead(opaque()) - 0.05).abs() < 1e-9,
        "it may be the listed one"
    );
    // Nothing listed but the token itself: the mass it leaves bounds every other.
    let alone = Position {
        token: Token::new(" a", None),
        logprob: Some(-0.01),
        top: vec![(Token::new(" a", None), -0.01)],
    };
    let bound = -0.01 - (1.0 - (-0.01f64).exp()).ln();
    assert!((alone.lead_over(&Token::new(" b", None)).unwrap() - bound).abs() < 1e-9);
}

/// Item 5: a best-first list with two entries spelled alike (a byte-fallback token that
/// decodes to the same text) kept the last, less likely one: a 0.01-nat near tie was
/// judged with a lead of 14.31.
#[test]
fn of_two_alternatives_spelled_alike_the_likelier_bounds_the_lead() {
    let value = json!({"content": [
        {"token": "B", "logprob": -0.69, "top_logprobs": [
            {"token": "B", "logprob": -0.69},
            {"token": "A", "logprob": -0.70},
            {"token": "A", "logprob": -15.0}]}
    ]});
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    let lead = out[0].lead_over(&Token::new("A", None)).unwrap();
    assert!((lead - 0.01).abs() < 1e-9, "lead {lead}");
}

/// Item 6: a positive logprob, or the chosen token's `null` (NaN or an infinity as vLLM
/// and SGLang serialize them), is no absence of data but broken numerics; an
/// alternative's `null` may be `-inf` and is left out.
#[test]
fn impossible_logprobs_are_told_from_malformed_ones() {
    for bad in [
        json!({"content": [{"token": "a", "logprob": 0.7}]}),
        json!({"content": [{"token": "a", "logprob": null}]}),
        json!({"tokens": ["a"], "token_logprobs": [null]}),
        json!({"tokens": ["a"], "token_logprobs": [0.7]}),
    ] {
        assert!(
            matches!(read(&bad, &mut Vec::new()), Err(Unreadable::Impossible(_))),
            "{bad}"
        );
    }
    assert!(matches!(
        read(
            &json!({"content": [{"token": "a", "logprob": "x"}]}),
            &mut Vec::new()
        ),
        Err(Unreadable::Malformed(_))
    ));
    let value = json!({"content": [{"token": "a", "logprob": -0.1, "top_logprobs": [
        {"token": "a", "logprob": -0.1}, {"token": "b", "logprob": null}]}]});
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    assert_eq!(out[0].top.len(), 1);
}

/// llama.cpp with `post_sampling_probs`: `prob` and `top_probs`, probabilities of the
/// distribution it drew from (llama-server b1-0c1e570, captured); a `prob` of 0 is no
/// chance, read as vLLM's -9999.
#[test]
fn post_sampling_probabilities_are_read_as_logprobs() {
    let value = json!({"content": [{"id": 273, "token": " it", "bytes": [32, 105, 116],
        "prob": 0.17411212623119354, "top_probs": [
            {"id": 373, "token": " way", "bytes": [32, 119, 97, 121], "prob": 0.2646332383155823},
            {"id": 273, "token": " it", "bytes": [32, 105, 116], "prob": 0.17411212623119354}]},
        {"token": " x", "prob": 0.0, "top_probs": []}]});
    let mut out = Vec::new();
    read(&value, &mut out).unwrap();
    assert!((out[0].logprob.unwrap() - 0.17411212623119354f64.ln()).abs() < 1e-12);
    assert_eq!(out[0].top.len(), 2);
    assert!((out[0].top[0].1 - 0.2646332383155823f64.ln()).abs() < 1e-12);
    assert_eq!(out[1].logprob, Some(-9999.0));
    assert!(matches!(
        read(
            &json!({"content": [{"token": "a", "prob": 1.5}]}),
            &mut Vec::new()
        ),
        Err(Unreadable::Impossible(_))
    ));
}
