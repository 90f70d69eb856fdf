//! Target events: one JSON object per stdout line, flushed at once; or one readable
//! line each without `--events json`.

use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;

pub(super) struct Events {
    json: bool,
    out: Mutex<()>,
}

impl Events {
    pub(super) fn new(json: bool) -> Self {
        Self {
            json,
            out: Mutex::new(()),
        }
    }

    /// Emit `{"event": name, ...fields}` ("event" first, the fields after it).
    pub(super) fn emit(&self, name: &str, fields: Value) {
        let line = if self.json {
            json_line(name, &fields)
        } else {
            human(name, &fields)
        };
        let _g = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (the harness went away) is not our error to report.
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

fn json_line(name: &str, fields: &Value) -> String {
    let mut s = format!("{{\"event\":{}", Value::from(name));
    if let Value::Object(o) = fields {
        for (k, v) in o {
            s.push_str(&format!(",{}:{v}", Value::from(k.as_str())));
        }
    }
    s.push('}');
    s
}

fn human(name: &str, fields: &Value) -> String {
    let mut s = format!("{name:>10}");
    if let Value::Object(o) = fields {
        for (k, v) in o {
            s.push_str(&format!(" {k}={v}"));
        }
    }
    s
}

/// Which connection a queue pair's stream belongs to, so that a shared receive
/// queue's events (which name a stream) can name the connection.
#[derive(Default)]
pub(super) struct Streams(Mutex<HashMap<u32, u64>>);

impl Streams {
    pub(super) fn insert(&self, qp_num: u32, conn: u64) {
        self.lock().insert(qp_num, conn);
    }

    pub(super) fn remove_conn(&self, conn: u64) {
        self.lock().retain(|_, c| *c != conn);
    }

    pub(super) fn conn(&self, qp_num: u32) -> Option<u64> {
        self.lock().get(&qp_num).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, u64>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}
