//! Users, tokens and authentication. Tokens are random, shown once, and stored only as their
//! SHA-256 digest (they carry 256 bits of entropy, so a slow hash adds nothing).

use super::{Actor, OpError, Result, resolve};
use crate::model::{Grant, Permission, Slug, User};
use crate::store::Store;
use chrono::Utc;
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use uuid::Uuid;

fn hash_token(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("cf_{}", hex::encode(bytes))
}

/// On an empty store, creates the `admin` user and returns its first token; otherwise `None`.
pub async fn bootstrap_admin(store: &Store) -> Result<Option<String>> {
    let mut tx = store.write().await?;
    if tx.count::<User>().await? > 0 {
        return Ok(None);
    }
    let now = Utc::now();
    let admin = User {
        UserID: Uuid::new_v4(),
        Slug: Slug::parse("admin")?,
        DisplayName: "admin".into(),
        Admin: true,
        Grants: vec![],
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&admin).await?;
    let token = new_token();
    tx.insert_token(&hash_token(&token), admin.UserID).await?;
    tx.commit().await?;
    Ok(Some(token))
}

/// The user a bearer token belongs to.
pub async fn authenticate(store: &Store, token: &str) -> Result<Actor> {
    let mut tx = store.read().await?;
    let user_id = tx.token_user(&hash_token(token)).await?.ok_or(OpError::Unauthenticated)?;
    let user = tx.get::<User>(user_id).await?.ok_or(OpError::Unauthenticated)?;
    Ok(Actor { user })
}

/// The body of a user creation. Grants are `SPACE=Level`, `*` for every Space.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateUser {
    pub Slug: String,
    #[serde(default)]
    pub DisplayName: Option<String>,
    #[serde(default)]
    pub Admin: bool,
    #[serde(default)]
    pub Grants: Vec<String>,
}

/// Creates a user. Admin only.
pub async fn create_user(store: &Store, actor: &Actor, req: CreateUser) -> Result<User> {
    if !actor.user.Admin {
        return Err(OpError::AdminOnly);
    }
    let slug = Slug::parse(&req.Slug)?;
    let mut tx = store.write().await?;
    let mut grants = vec![];
    for g in &req.Grants {
        let (space, level) = g.split_once('=').ok_or_else(|| {
            OpError::invalid("Grants", g.as_str(), "expected SPACE=View|Edit|Approve|Manage")
        })?;
        let permission: Permission = level.parse()?;
        let space_id = if space == "*" { None } else { Some(resolve::space(&mut tx, space).await?.SpaceID) };
        grants.push(Grant { SpaceID: space_id, Permission: permission });
    }
    let now = Utc::now();
    let user = User {
        UserID: Uuid::new_v4(),
        DisplayName: req.DisplayName.unwrap_or_else(|| slug.to_string()),
        Slug: slug,
        Admin: req.Admin,
        Grants: grants,
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    tx.insert(&user).await?;
    tx.commit().await?;
    Ok(user)
}

/// Lists users. Admin only.
pub async fn list_users(store: &Store, actor: &Actor) -> Result<Vec<User>> {
    if !actor.user.Admin {
        return Err(OpError::AdminOnly);
    }
    Ok(store.read().await?.list::<User>(None).await?)
}

/// Mints a token for `user`: admins for anyone, users for themselves. Returned once.
pub async fn create_token(store: &Store, actor: &Actor, user: &str) -> Result<String> {
    let mut tx = store.write().await?;
    let target = match Uuid::parse_str(user) {
        Ok(id) => tx.get::<User>(id).await?,
        Err(_) => tx.find::<User>(None, user).await?,
    }
    .ok_or_else(|| OpError::NotFound { kind: "User", key: user.to_string() })?;
    if !actor.user.Admin && actor.user.UserID != target.UserID {
        return Err(OpError::AdminOnly);
    }
    let token = new_token();
    tx.insert_token(&hash_token(&token), target.UserID).await?;
    tx.commit().await?;
    Ok(token)
}
