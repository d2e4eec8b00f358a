//! What an interpreter would load from the working folder in place of the
//! module a check names: protecting `tests/**` means little if an agent can
//! write `unittest/__main__.py` printing OK, which `python3 -m unittest`
//! then runs instead of the real one. Pure: a check's argv in, the
//! workspace-relative paths (and globs) it would resolve first out.
//!
//! The rule, per argv (the program's file name decides):
//! - `python`, `python3`, `python3.N`: `sitecustomize.py`,
//!   `usercustomize.py`; with `-m MOD`, MOD's top-level name `P` as
//!   `P.py`, `P/`, `P.pyc`, `P.so`, `P.*.so` (the working folder is first
//!   on `sys.path`); when MOD is `pytest`, what pytest reads as well.
//! - `pytest`, `py.test` (or `-m pytest`): `conftest.py`, `pytest.ini`,
//!   `pyproject.toml`, `setup.cfg`, `tox.ini` at the top of the workspace
//!   (a `conftest.py` below a protected folder is protected with it).
//!
//! Other interpreters are not resolved (`node_modules` is a tree, not a
//! name): protect what they load by name in the constraint.

/// The paths `argv` would resolve from the working folder before what it
/// names, in order, without repeats.
pub fn shadows(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let Some(program) = argv.first().map(|p| p.rsplit('/').next().unwrap_or(p)) else { return out };
    let mut add = |paths: &[String]| {
        for p in paths {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
    };
    if is_python(program) {
        add(&["sitecustomize.py".into(), "usercustomize.py".into()]);
        if let Some(module) = module_of(argv) {
            let top = module.split('.').next().unwrap_or(module);
            if !top.is_empty() {
                add(&[
                    format!("{top}.py"),
                    top.to_string(),
                    format!("{top}.pyc"),
                    format!("{top}.so"),
                    format!("{top}.*.so"),
                ]);
            }
            if top == "pytest" {
                add(&pytest());
            }
        }
    } else if program == "pytest" || program == "py.test" {
        add(&pytest());
    }
    out
}

fn is_python(program: &str) -> bool {
    program == "python"
        || program == "python3"
        || program.strip_prefix("python3.").is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
}

/// The module of `python … -m MOD …` (`-mMOD` too).
fn module_of(argv: &[String]) -> Option<&str> {
    let mut args = argv.iter().skip(1);
    while let Some(a) = args.next() {
        if a == "-m" {
            return args.next().map(String::as_str);
        }
        if let Some(m) = a.strip_prefix("-m").filter(|m| !m.is_empty()) {
            return Some(m);
        }
        if a == "-c" || !a.starts_with('-') {
            // A command string or a script: no module follows.
            return None;
        }
    }
    None
}

fn pytest() -> Vec<String> {
    ["conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"].iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn python_m_names_the_module_as_a_file_a_folder_and_compiled_forms() {
        assert_eq!(
            shadows(&argv("python3 -m unittest -q tests.test_cents")),
            vec![
                "sitecustomize.py",
                "usercustomize.py",
                "unittest.py",
                "unittest",
                "unittest.pyc",
                "unittest.so",
                "unittest.*.so"
            ]
        );
        // A dotted module: its top-level package; `-mMOD`; a full path.
        assert!(shadows(&argv("/usr/bin/python3.12 -mfoo.bar")).contains(&"foo".to_string()));
        assert!(shadows(&argv("python -I -m json.tool")).contains(&"json.py".to_string()));
    }

    #[test]
    fn pytest_reads_its_configuration_and_conftest() {
        let direct = shadows(&argv("pytest -q tests"));
        assert_eq!(direct, vec!["conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini"]);
        let module = shadows(&argv("python3 -m pytest"));
        assert!(module.contains(&"pytest".to_string()) && module.contains(&"conftest.py".to_string()));
    }

    #[test]
    fn a_script_or_a_command_string_names_no_module() {
        assert_eq!(shadows(&argv("python3 tests/run.py -m x")), vec!["sitecustomize.py", "usercustomize.py"]);
        assert_eq!(shadows(&argv("python3 -c pass")), vec!["sitecustomize.py", "usercustomize.py"]);
        assert!(shadows(&argv("true")).is_empty());
        assert!(shadows(&argv("node test.js")).is_empty(), "not resolved: documented");
        assert!(shadows(&[]).is_empty());
        assert!(shadows(&argv("python3 -m")).len() == 2, "no module named");
        assert!(!is_python("python3.x") && is_python("python3.11") && !is_python("pythonista"));
    }
}
