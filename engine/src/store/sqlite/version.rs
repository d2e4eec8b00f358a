//! The schema version (SQLite's `user_version`, header bytes 60-63) judged
//! against what the store holds. SQLite trusts the four bytes as given, so
//! a damaged value read as an older version was "migrated" over tables
//! that already had its columns ("duplicate column name": an internal
//! error), and a negative one passed every check. A version other than
//! this engine's is believed only when the store's schema is what the
//! migrations make at that version (`sqlite_schema`, entry by entry: a
//! released migration is never edited, so its text is the same in every
//! store it made) — or, above this engine's, unless the tables are a
//! version this engine knows and the mark records that an engine no newer
//! than this one last held the store: then the bytes are damaged
//! (`STORE_CORRUPT`), not a newer engine's (`SCHEMA_TOO_NEW`).
//!
//! The judgement (`judge`) is a pure function of what was read. Only a
//! version other than this engine's pays for the comparison.

use std::collections::BTreeSet;

use rusqlite::Connection;

use super::schema::{self, SCHEMA_VERSION};
use crate::error::Result;

/// One entry of `sqlite_schema`: type, name, table, SQL text.
type Entry = (String, String, String, Option<String>);

/// What a store's schema is: its entries, SQLite's own left out.
pub type Schema = BTreeSet<Entry>;

/// How a version other than this engine's is taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// As it says: an older store (a writer migrates it) or a file that
    /// holds no ledger yet.
    Believed,
    /// A newer engine's store.
    TooNew,
    /// The bytes are damaged: what they say, in words.
    Damaged(String),
}

/// Judge the version `claimed` by the store's header, given which known
/// versions' schemas equal the store's (`matching`, ascending; 0 is the
/// empty schema) and the version the mark records its last writer left.
pub fn judge(claimed: i64, matching: &[i64], marked: Option<i64>) -> Verdict {
    if claimed == SCHEMA_VERSION || ((0..SCHEMA_VERSION).contains(&claimed) && matching.contains(&claimed)) {
        return Verdict::Believed;
    }
    let known_tables = matching.last().copied();
    if claimed > SCHEMA_VERSION && !(known_tables.is_some() && marked.is_some_and(|m| m <= SCHEMA_VERSION)) {
        return Verdict::TooNew;
    }
    let tables = match known_tables {
        Some(0) => "the store holds no tables".to_string(),
        Some(v) => format!("the store's tables are schema version {v}'s"),
        None => "the store's tables are no schema version this engine knows".to_string(),
    };
    Verdict::Damaged(format!("header bytes 60-63 (schema version) is {claimed}, but {tables}"))
}

/// The store's schema as `sqlite_schema` lists it.
pub fn schema_of(conn: &Connection) -> Result<Schema> {
    let mut stmt =
        conn.prepare("SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The known versions (0 to this engine's) whose schema is `schema`,
/// ascending: the migrations run one by one on an empty database in memory.
pub fn matching(schema: &Schema) -> Result<Vec<i64>> {
    super::open::process_settings();
    let fresh = Connection::open_in_memory()?;
    let mut found = Vec::new();
    for version in 0..=SCHEMA_VERSION {
        if version > 0 {
            let v = version as usize;
            schema::apply(&fresh, v - 1, v)?;
        }
        if schema_of(&fresh)? == *schema {
            found.push(version);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_engines_version_and_an_older_one_that_its_tables_match_are_believed() {
        assert_eq!(judge(SCHEMA_VERSION, &[], None), Verdict::Believed);
        assert_eq!(judge(4, &[4], Some(4)), Verdict::Believed);
        assert_eq!(judge(0, &[0], None), Verdict::Believed, "a file with no ledger yet");
    }

    #[test]
    fn a_version_its_tables_do_not_match_is_damage_naming_both() {
        let older = judge(SCHEMA_VERSION - 1, &[SCHEMA_VERSION], Some(SCHEMA_VERSION));
        assert_eq!(
            older,
            Verdict::Damaged(format!(
                "header bytes 60-63 (schema version) is {}, but the store's tables are schema version {SCHEMA_VERSION}'s",
                SCHEMA_VERSION - 1
            ))
        );
        for claimed in [-1, i64::from(i32::MIN), 0] {
            assert!(matches!(judge(claimed, &[SCHEMA_VERSION], None), Verdict::Damaged(_)), "{claimed}");
        }
        let Verdict::Damaged(why) = judge(3, &[], None) else { panic!("damaged") };
        assert!(why.contains("no schema version this engine knows"), "{why}");
    }

    #[test]
    fn a_higher_version_is_a_newer_engines_unless_the_tables_and_the_mark_say_ours() {
        let higher = SCHEMA_VERSION + 70;
        assert_eq!(judge(higher, &[], Some(SCHEMA_VERSION)), Verdict::TooNew, "tables a newer engine made");
        assert_eq!(judge(higher, &[SCHEMA_VERSION], None), Verdict::TooNew, "no record of who held it last");
        assert_eq!(judge(higher, &[SCHEMA_VERSION], Some(higher)), Verdict::TooNew, "a newer engine held it last");
        assert!(matches!(judge(higher, &[SCHEMA_VERSION], Some(SCHEMA_VERSION)), Verdict::Damaged(_)));
    }

    #[test]
    fn every_known_version_matches_its_own_schema_and_no_other() {
        let conn = Connection::open_in_memory().unwrap();
        assert_eq!(matching(&schema_of(&conn).unwrap()).unwrap(), vec![0]);
        for version in 1..=SCHEMA_VERSION {
            let v = version as usize;
            schema::apply(&conn, v - 1, v).unwrap();
            assert_eq!(matching(&schema_of(&conn).unwrap()).unwrap(), vec![version], "version {version}");
        }
    }
}
