use super::*;

#[test]
fn every_category_has_a_distinct_label() {
    let mut names: Vec<_> = ErrorCategory::ALL.iter().map(|c| c.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), ErrorCategory::ALL.len());
}

#[test]
fn statuses_map_to_categories() {
    let cases = [
        (401, ErrorCategory::Auth),
        (403, ErrorCategory::Auth),
        (429, ErrorCategory::RateLimited),
        (400, ErrorCategory::Http4xx),
        (404, ErrorCategory::Http4xx),
        (500, ErrorCategory::Http5xx),
        (503, ErrorCategory::Http5xx),
        (302, ErrorCategory::InvalidResponse),
        (307, ErrorCategory::InvalidResponse),
        (101, ErrorCategory::Other),
    ];
    for (code, want) in cases {
        let status = StatusCode::from_u16(code).unwrap();
        assert_eq!(ErrorCategory::from_status(status), want, "status {code}");
    }
}

#[test]
fn a_redirect_names_where_it_pointed_without_query_or_credentials() {
    let url = url::Url::parse("http://gw.example:8000/v1/chat/completions").unwrap();
    let status = StatusCode::TEMPORARY_REDIRECT;
    let location = |text: &'static str| http::HeaderValue::from_static(text);
    let err = ProbeError::redirect(
        status,
        Some(&location("https://u:pw@idp.example/login?token=s3cret#x")),
        &url,
    );
    assert_eq!(err.category(), ErrorCategory::InvalidResponse);
    assert_eq!(
        err.to_string(),
        "HTTP 307 Temporary Redirect: a redirect to https://idp.example/login; \
         redirects are not followed"
    );
    let relative = ProbeError::redirect(status, Some(&location("/v2/x?k=1")), &url);
    assert!(
        relative
            .to_string()
            .contains("to http://gw.example:8000/v2/x;")
    );
    let none = ProbeError::redirect(status, None, &url);
    assert!(none.to_string().contains("(no Location header)"));
    let bad = http::HeaderValue::from_bytes(b"/caf\xe9").unwrap();
    let bad = ProbeError::redirect(status, Some(&bad), &url);
    assert!(bad.to_string().contains("(an unreadable Location)"));
}

#[test]
fn dns_cause_is_found_through_io_wrappers() {
    let dns = DnsError {
        host: "nowhere.invalid".into(),
        source: std::io::Error::other("no such host"),
    };
    let wrapped = std::io::Error::other(dns);
    assert!(has_cause::<DnsError>(&wrapped));
    assert!(!has_cause::<rustls::Error>(&wrapped));
    assert_eq!(
        chain(&wrapped),
        "DNS lookup of nowhere.invalid failed: no such host"
    );
}

#[test]
fn a_request_over_the_context_window_is_context_length_not_http_4xx() {
    let status = |code: u16, body: &str| {
        ProbeError::Status {
            status: StatusCode::from_u16(code).unwrap(),
            body: body.into(),
        }
        .category()
    };
    // The messages as each server words them: vLLM's and llama-server's from the captures in
    // tests/fixtures/, the others from their documentation and source.
    for body in [
        "This model's maximum context length is 2048 tokens. However, your prompt contains at least 2049 input tokens",
        "max_tokens=100000 cannot be greater than max_model_len=2048. Please request fewer output tokens.",
        "The decoder prompt (length 3000) is longer than the maximum model length of 2048.",
        "The input (5000 tokens) is longer than the model's context length (4096 tokens).",
        "request (5002 tokens) exceeds the available context size (1024 tokens), try increasing it",
        "prompt is too long: 210000 tokens > 200000 maximum",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`",
        "Input validation error: `inputs` must have less than 1024 tokens. Given: 2000",
        "input length and `max_tokens` exceed context limit: 199000 + 64 > 200000, decrease input length or `max_tokens` and try again",
        "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).",
        "Input is too long for requested model.",
        "The model returned the following errors: prompt is too long: too many input tokens",
    ] {
        assert_eq!(status(400, body), ErrorCategory::ContextLength, "{body}");
    }
    assert_eq!(
        status(413, "Request too large: context window exceeded"),
        ErrorCategory::ContextLength
    );
    // Other refusals stay what they were; a 5xx that mentions the context is the server's fault.
    assert_eq!(
        status(404, "The model `nope` does not exist. Valid aliases: tiny."),
        ErrorCategory::Http4xx
    );
    assert_eq!(status(401, "context length"), ErrorCategory::Auth);
    assert_eq!(
        status(500, "maximum context length exceeded in the scheduler"),
        ErrorCategory::Http5xx
    );
}

#[test]
fn a_503_that_says_overloaded_is_load_shed_and_other_503s_are_the_servers() {
    let status = |body: &str| {
        ProbeError::Status {
            status: StatusCode::SERVICE_UNAVAILABLE,
            body: body.into(),
        }
        .category()
    };
    // Gemini's and Vertex AI's UNAVAILABLE.
    assert_eq!(
        status("The model is overloaded. Please try again later."),
        ErrorCategory::Overloaded
    );
    assert_eq!(status("upstream connect error"), ErrorCategory::Http5xx);
    assert_eq!(status("Service Unavailable"), ErrorCategory::Http5xx);
}

#[test]
fn gemini_key_refusals_are_auth_and_azure_prompt_filters_content_filtered() {
    let status = |code: u16, body: &str| {
        ProbeError::Status {
            status: StatusCode::from_u16(code).unwrap(),
            body: body.into(),
        }
        .category()
    };
    assert_eq!(
        status(400, "API key not valid. Please pass a valid API key."),
        ErrorCategory::Auth
    );
    assert_eq!(
        status(400, "API key expired. Please renew the API key."),
        ErrorCategory::Auth
    );
    assert_eq!(
        status(
            400,
            "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."
        ),
        ErrorCategory::ContentFiltered
    );
    assert_eq!(
        status(400, "Unrecognized request argument supplied: ignore_eos"),
        ErrorCategory::Http4xx
    );
}
