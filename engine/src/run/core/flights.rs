//! The run's attempts in flight (dispatched and not yet at their end), by
//! attempt id, kept beside a flag the driver reads at every request: may
//! an attempt of the run be writing the workspace now? A file hashed then
//! is never trusted by its times (`checkpoint::cache`).

use std::cell::Cell;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::rc::Rc;

use super::state::Flight;
use crate::ids::AttemptId;

/// By attempt id, so that whatever walks them walks in one order. Added
/// and removed only here, so the flag never disagrees with the map.
pub(super) struct Flights {
    map: BTreeMap<AttemptId, Flight>,
    /// Shared with the door (`Io`): is any attempt in flight?
    busy: Rc<Cell<bool>>,
}

impl Flights {
    pub fn new(busy: Rc<Cell<bool>>) -> Flights {
        busy.set(false);
        Flights { map: BTreeMap::new(), busy }
    }

    pub fn insert(&mut self, id: AttemptId, flight: Flight) -> Option<Flight> {
        let old = self.map.insert(id, flight);
        self.busy.set(true);
        old
    }

    pub fn remove(&mut self, id: &AttemptId) -> Option<Flight> {
        let gone = self.map.remove(id);
        self.busy.set(!self.map.is_empty());
        gone
    }

    pub fn get_mut(&mut self, id: &AttemptId) -> Option<&mut Flight> {
        self.map.get_mut(id)
    }
}

impl Deref for Flights {
    type Target = BTreeMap<AttemptId, Flight>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}
