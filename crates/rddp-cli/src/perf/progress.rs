//! The progress bar: on a terminal only, never with --json.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// A bar over `sizes` sizes, hidden unless stdout is a terminal and not --json.
pub(crate) fn bar(sizes: u64, json: bool) -> ProgressBar {
    if json || !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(sizes);
    if let Ok(style) =
        ProgressStyle::with_template(" [{elapsed_precise}] {bar:40} {pos}/{len} sizes")
    {
        pb.set_style(style);
    }
    // Redraw (the elapsed time) while a long size runs.
    pb.enable_steady_tick(std::time::Duration::from_millis(250));
    pb
}

/// Print a line above the bar (or plainly when it is hidden).
pub(crate) fn println(bar: &ProgressBar, line: String) {
    if bar.is_hidden() {
        say!("{line}");
    } else {
        bar.println(line);
    }
}
