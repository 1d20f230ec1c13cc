//! What a session says (docs/sessions.md, "What a session sends"): a system prompt shared
//! by every session (as agents share theirs), one tool, and the questions of each turn, the
//! first opening with the session's own id (so no other session's cache serves what
//! follows it, and its later turns hit only where its own earlier turns were served); and the tool's results, each carrying a fresh secret the answer after it
//! must quote. Orders and secrets are drawn per session: no answer can be remembered.

use std::sync::Arc;

use rand::{Rng, RngExt};
use serde_json::json;

use crate::structure::{Function, Schema, Structure, ToolChoice};

/// The one tool a session declares.
pub const TOOL: &str = "get_order_status";

pub struct Script {
    /// The session's id: the affinity headers' value, and the system prompt's first word.
    pub id: String,
    orders: [String; 3],
}

/// The tool's result for one call: its secret (the tracking code), and its content.
pub struct Lookup {
    pub secret: String,
    pub content: String,
}

impl Script {
    pub fn new(rng: &mut impl Rng) -> Self {
        let mut order = |letter: char| format!("{letter}-{:04}", rng.random_range(1000..10_000));
        let orders = [order('A'), order('B'), order('C')];
        Self {
            id: format!("{:016x}", rng.random::<u64>()),
            orders,
        }
    }

    /// The same for every session, as an agent's system prompt is: a router keyed on the
    /// first message sends every session to one replica, as it does real agents.
    pub fn system(&self) -> String {
        format!(
            "You are an order-support agent. Look orders up with the {TOOL} tool, one call per order, and never guess. Answer in one short sentence and quote each tracking code exactly as the tool returned it."
        )
    }

    /// The first question opens with the session's id: from it on, no other session's
    /// prompt is the same, so only this session's own turns can be in a cache for it.
    pub fn first(&self) -> String {
        format!(
            "Conversation {}. What is the tracking code of order {}?",
            self.id, self.orders[0]
        )
    }

    pub fn follow_up(&self) -> String {
        "Thanks. Has that order shipped yet? Answer in one short sentence.".to_owned()
    }

    /// Two lookups at once, or (`parallel` off) one more.
    pub fn second_lookup(&self, parallel: bool) -> String {
        let [_, b, c] = &self.orders;
        match parallel {
            true => format!(
                "Now look up orders {b} and {c} at the same time, with one call for each in a single reply. What are their tracking codes?"
            ),
            false => format!("Now look up order {b}. What is its tracking code?"),
        }
    }

    pub fn long_gap(&self) -> String {
        "I am back. Which order did I ask about first, and what was its tracking code?".to_owned()
    }

    /// The depth turn's question after `padding` (a log the user pasted).
    pub fn depth(&self, padding: &str) -> String {
        format!("Here is a log from our warehouse:\n{padding}\nWhich order did I ask about first?")
    }

    /// The tool's answer to a call with `arguments` (its order, as the model wrote it).
    pub fn lookup(rng: &mut impl Rng, arguments: &str) -> Lookup {
        let order = serde_json::from_str::<serde_json::Value>(arguments)
            .ok()
            .and_then(|v| {
                v.get("order_id")
                    .and_then(|o| o.as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_default();
        let secret = format!("TRK-{:08X}", rng.random::<u32>());
        let content = json!({ "order_id": order, "status": "shipped", "tracking_code": secret });
        Lookup {
            secret,
            content: content.to_string(),
        }
    }
}

/// The tools every turn declares (a history that holds calls needs them declared), and
/// how a turn that needs a call asks for it.
pub fn structure(force: bool) -> (Arc<Structure>, Arc<Structure>) {
    let parameters = json!({
        "type": "object",
        // A pattern, as agents' own tools declare one: a server's grammar (a forced call)
        // then writes a valid id even for a random-weight model, instead of a string that
        // runs to the length limit.
        "properties": { "order_id": {
            "type": "string",
            "pattern": "^[A-Z]-[0-9]{4}$",
            "description": "The order's id, like A-1234",
        } },
        "required": ["order_id"],
    });
    let tools = vec![Function {
        name: TOOL.to_owned(),
        description: Some("The status and tracking code of one order.".to_owned()),
        // The schema is this file's own: it compiles.
        parameters: Schema::compile(parameters).unwrap_or_else(|e| unreachable!("{e}")),
        strict: None,
    }];
    // Forced calls: the answer turns say `none`, not `auto`. A server that serves a forced
    // call by its grammar but has no tool parser for `auto` (vLLM before 0.12 without
    // `--enable-auto-tool-choice`) would refuse `auto` on turn 2, as if it were the history.
    let (answer, call) = match force {
        true => (ToolChoice::None, ToolChoice::Required),
        false => (ToolChoice::Auto, ToolChoice::Auto),
    };
    let any = Structure {
        response_format: None,
        tools: tools.clone(),
        tool_choice: Some(answer),
    };
    let call = Structure {
        tool_choice: Some(call),
        ..any.clone()
    };
    (Arc::new(any), Arc::new(call))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn each_session_draws_its_own_orders_and_secrets() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let (a, b) = (Script::new(&mut rng), Script::new(&mut rng));
        assert_ne!(a.id, b.id);
        assert_eq!(a.system(), b.system());
        assert!(a.first().starts_with(&format!("Conversation {}", a.id)));
        assert_ne!(a.first(), b.first());
        let lookup = Script::lookup(&mut rng, r#"{"order_id":"A-1234"}"#);
        assert!(lookup.secret.starts_with("TRK-") && lookup.secret.len() == 12);
        assert!(lookup.content.contains(&lookup.secret) && lookup.content.contains("A-1234"));
        // Arguments that are no object still get a result (with no order).
        assert!(
            Script::lookup(&mut rng, "nonsense")
                .content
                .contains("tracking_code")
        );
        let (any, call) = structure(true);
        assert_eq!(any.tool_choice, Some(ToolChoice::None));
        assert_eq!(call.tool_choice, Some(ToolChoice::Required));
        let (any, call) = structure(false);
        assert_eq!(any.tool_choice, Some(ToolChoice::Auto));
        assert_eq!(call.tool_choice, Some(ToolChoice::Auto));
        assert!(any.function(TOOL).is_some());
    }
}
