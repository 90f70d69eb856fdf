//! The results: a table a person reads, or one JSON object.

use super::judge::Verdict;
use super::run::Outcome;
use serde_json::{Value, json};

pub(super) fn result_name(v: &Verdict) -> &'static str {
    match v {
        Verdict::Pass(_) => "pass",
        Verdict::Fail { .. } => "FAIL",
        Verdict::NotApplicable(_) => "n/a",
    }
}

/// One table row: case, RFC section, result, and what came.
pub(super) fn row(o: &Outcome) -> String {
    let detail = match &o.verdict {
        Verdict::Pass(n) => n.clone(),
        Verdict::Fail { expected, got } => format!("expected {expected}; got {got}"),
        Verdict::NotApplicable(why) => why.clone(),
    };
    format!(
        "{:<30} {:<28} {:<5} {:>6} ms  {detail}",
        o.case.id,
        o.case.rfc,
        result_name(&o.verdict),
        o.millis
    )
}

pub(super) fn header() -> String {
    format!(
        "{:<30} {:<28} {:<5} {:>9}  {}",
        "CASE", "RFC", "RESULT", "TIME", "DETAIL"
    )
}

/// (passed, failed, not applicable).
pub(super) fn counts(all: &[Outcome]) -> (usize, usize, usize) {
    let n = |f: fn(&Verdict) -> bool| all.iter().filter(|o| f(&o.verdict)).count();
    (
        n(|v| matches!(v, Verdict::Pass(_))),
        n(Verdict::is_fail),
        n(|v| matches!(v, Verdict::NotApplicable(_))),
    )
}

pub(super) fn summary(all: &[Outcome]) -> String {
    let (p, f, na) = counts(all);
    format!("{p} passed, {f} failed, {na} not applicable")
}

pub(super) fn json(peer: &str, transport: &str, role: &str, all: &[Outcome]) -> Value {
    let cases: Vec<Value> = all
        .iter()
        .map(|o| {
            let mut v = json!({
                "id": o.case.id,
                "rfc": o.case.rfc,
                "expect": o.case.expect,
                "result": match o.verdict {
                    Verdict::Pass(_) => "pass",
                    Verdict::Fail { .. } => "fail",
                    Verdict::NotApplicable(_) => "n/a",
                },
                "ms": o.millis as u64,
            });
            match &o.verdict {
                Verdict::Pass(n) => v["note"] = json!(n),
                Verdict::Fail { expected, got } => {
                    v["expected"] = json!(expected);
                    v["got"] = json!(got);
                }
                Verdict::NotApplicable(why) => v["reason"] = json!(why),
            }
            v
        })
        .collect();
    let (p, f, na) = counts(all);
    json!({
        "peer": peer,
        "transport": transport,
        "role": role,
        "cases": cases,
        "passed": p,
        "failed": f,
        "not_applicable": na,
    })
}
