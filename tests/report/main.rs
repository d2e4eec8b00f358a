//! Issue 13: `engine report` — the report document (`--json`) and the
//! self-contained HTML page, end to end with the real binary, and the page
//! opened in a real headless Chromium.

mod architecture;
mod browser;
mod cdp;
mod document;
mod scenario;
