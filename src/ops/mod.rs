//! The use cases. Each function reads what it needs from the store, calls the pure core
//! (`model`, `query`, `merge`, `invoke`) to compute the result, and writes it in one
//! transaction, after checking the caller's permission. The API, the demo and later the job
//! workers all go through here, so the rules hold for every entry point.

mod attestations;
mod changeorders;
mod co_state;
pub use co_state::view_change_order;
mod error;
mod functions;
mod promote;
pub mod promotions;
mod releases;
mod resolve;
pub mod schedules;
mod simple;
mod spaces;
mod stages;
mod units;
mod upgrade;
mod users;
mod variants;
mod webhooks;
mod workflows;

pub use attestations::*;
pub use changeorders::*;
pub use error::OpError;
pub use functions::*;
pub use promote::*;
pub use releases::*;
pub use resolve::parse_key;
pub use simple::*;
pub use spaces::*;
pub use units::*;
pub use upgrade::*;
pub use users::*;
pub use variants::*;
pub use webhooks::*;
pub use workflows::*;

use crate::model::{Permission, User};
use uuid::Uuid;

pub type Result<T, E = OpError> = std::result::Result<T, E>;

/// Who is acting: the authenticated user.
#[derive(Debug, Clone)]
pub struct Actor {
    pub user: User,
}

impl Actor {
    /// Refuses unless the actor holds at least `need` on `space`.
    pub fn require(&self, space: Uuid, space_slug: &str, need: Permission) -> Result<()> {
        match self.user.permission_on(space) {
            Some(p) if p >= need => Ok(()),
            _ => Err(OpError::Forbidden {
                user: self.user.Slug.to_string(),
                permission: need,
                space: space_slug.to_string(),
            }),
        }
    }

    /// Whether the actor may see `space` at all.
    pub fn can_view(&self, space: Uuid) -> bool {
        self.user.permission_on(space).is_some()
    }

    /// The UserID recorded on revisions this actor writes.
    pub fn id(&self) -> Uuid {
        self.user.UserID
    }
}
