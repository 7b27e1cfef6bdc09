//! Webhooks: authenticated deliveries that act on a ChangeOrder with the permissions of the
//! user who created the webhook. A delivery must be signed (HMAC-SHA256 with the webhook's
//! secret, compared in constant time), recent (its timestamp within five minutes) and new (its
//! delivery ID accepted once); anything else is refused and nothing happens.

use super::{Actor, OpError, Result, resolve};
use crate::model::{ChangeOrder, Permission, Slug, Space, User, Webhook, WebhookAction};
use crate::store::Store;
use chrono::Utc;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;
use uuid::Uuid;

/// How far a delivery's timestamp may be from now.
pub const MAX_SKEW_SECONDS: i64 = 300;

/// The headers and body of a delivery, as received.
#[derive(Debug, Default, Clone)]
pub struct Delivery {
    /// `X-Changeflow-Timestamp`: unix seconds.
    pub timestamp: Option<String>,
    /// `X-Changeflow-Delivery`, or GitHub's `X-GitHub-Delivery`.
    pub delivery_id: Option<String>,
    /// `X-Changeflow-Signature: sha256=<hex>` over `"<timestamp>.<body>"`.
    pub signature: Option<String>,
    /// GitHub's `X-Hub-Signature-256: sha256=<hex>` over the body.
    pub github_signature: Option<String>,
    pub body: Vec<u8>,
}

fn mac_ok(secret: &str, parts: &[&[u8]], signature: &str) -> bool {
    let Some(hex_sig) = signature.strip_prefix("sha256=") else { return false };
    let Ok(expected) = hex::decode(hex_sig.trim()) else { return false };
    let Ok(mut mac) = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()) else { return false };
    for p in parts {
        mac.update(p);
    }
    mac.verify_slice(&expected).is_ok()
}

/// Checks a delivery's signature and freshness; returns its delivery ID, or why it is refused.
pub fn verify(secret: &str, d: &Delivery, now_unix: i64) -> std::result::Result<String, &'static str> {
    let id = d.delivery_id.clone().filter(|i| !i.trim().is_empty()).ok_or("no delivery ID")?;
    if let Some(sig) = &d.signature {
        let ts = d.timestamp.as_deref().ok_or("no X-Changeflow-Timestamp")?;
        let t: i64 = ts.trim().parse().map_err(|_| "X-Changeflow-Timestamp is not unix seconds")?;
        if (now_unix - t).abs() > MAX_SKEW_SECONDS {
            return Err("X-Changeflow-Timestamp is more than five minutes away");
        }
        if !mac_ok(secret, &[ts.trim().as_bytes(), b".", &d.body], sig) {
            return Err("bad signature");
        }
        return Ok(id);
    }
    if let Some(sig) = &d.github_signature {
        if !mac_ok(secret, &[&d.body], sig) {
            return Err("bad signature");
        }
        return Ok(id);
    }
    Err("unsigned delivery")
}

/// The body of a webhook creation.
#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    pub Slug: String,
    /// `promote`, `attest`, `invoke` or `livestatus`.
    pub Action: String,
    /// `space/slug` of the ChangeOrder acted on (promote, attest).
    #[serde(default)]
    pub ChangeOrder: Option<String>,
    /// For `invoke`: `space/slug` of the Invocation, its parameters as name → JSON pointer into
    /// the delivery's body (`image=/build/image`), and where it runs.
    #[serde(default)]
    pub Invocation: Option<String>,
    #[serde(default)]
    pub Parameters: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub WhereSpace: Option<String>,
    #[serde(default)]
    pub WhereUnit: Option<String>,
    /// For `livestatus`: the Space whose live status is set (default: the Application's name).
    #[serde(default)]
    pub LiveStatusSpace: Option<String>,
    /// For `promote`: the Stage to promote to (default: the next one).
    #[serde(default)]
    pub TargetStage: Option<String>,
    /// For `attest`: the Attestation type recorded, and the Space it is recorded in.
    #[serde(default)]
    pub Type: Option<String>,
    #[serde(default)]
    pub AttestSpace: Option<String>,
}

/// A new webhook: where to send deliveries and the secret to sign them with (shown once).
#[allow(non_snake_case)]
#[derive(Debug, Serialize)]
pub struct WebhookCreated {
    #[serde(flatten)]
    pub Webhook: Webhook,
    pub URL: String,
    pub Secret: String,
}

/// Creates a webhook in `space`. Needs Manage: it acts with its creator's permissions.
pub async fn create_webhook(
    store: &Store,
    actor: &Actor,
    space: &str,
    req: CreateWebhook,
) -> Result<WebhookCreated> {
    let slug = Slug::parse(&req.Slug)?;
    let mut tx = store.write().await?;
    let sp = resolve::space(&mut tx, space).await?;
    actor.require(sp.SpaceID, sp.Slug.as_str(), Permission::Manage)?;
    let co = match (&req.ChangeOrder, req.Action.as_str()) {
        (Some(k), _) => Some(resolve::qualified::<ChangeOrder>(&mut tx, k, Some(&sp)).await?.1),
        (None, "promote" | "attest") => {
            return Err(OpError::invalid("ChangeOrder", "", "this action needs --change-order S/CO"));
        }
        _ => None,
    };
    let action = match req.Action.as_str() {
        "promote" => {
            let co = co.clone().expect("checked above");
            WebhookAction::Promote { ChangeOrderID: co.ChangeOrderID, TargetStage: req.TargetStage.clone() }
        }
        "attest" => {
            let co = co.clone().expect("checked above");
            let kind = req
                .Type
                .clone()
                .ok_or_else(|| OpError::invalid("Type", "", "an attest webhook needs --type"))?;
            Slug::parse_field("Type", &kind)?;
            let key = req.AttestSpace.clone().ok_or_else(|| {
                OpError::invalid("AttestSpace", "", "an attest webhook needs the Space it attests in")
            })?;
            let target = resolve::space(&mut tx, &key).await?;
            WebhookAction::Attest { ChangeOrderID: co.ChangeOrderID, SpaceID: target.SpaceID, Type: kind }
        }
        "invoke" => {
            let key = req.Invocation.clone().ok_or_else(|| {
                OpError::invalid("Invocation", "", "an invoke webhook needs --invocation S/I")
            })?;
            let (_, inv) = resolve::qualified::<crate::model::Invocation>(&mut tx, &key, Some(&sp)).await?;
            for (name, pointer) in &req.Parameters {
                if !pointer.is_empty() && !pointer.starts_with('/') {
                    return Err(OpError::invalid(
                        format!("Parameters.{name}"),
                        pointer.as_str(),
                        "a JSON pointer into the delivery's body starts with '/', e.g. /build/image",
                    ));
                }
            }
            let where_space = req.WhereSpace.clone().unwrap_or_default();
            crate::query::WhereExpr::parse(
                &where_space,
                crate::query::attrs::entity("Space").expect("Space has attributes"),
            )
            .map_err(|e| OpError::invalid("WhereSpace", where_space.as_str(), e.to_string()))?;
            WebhookAction::Invoke {
                InvocationID: inv.InvocationID,
                Parameters: req.Parameters.clone(),
                WhereSpace: where_space,
                WhereUnit: req.WhereUnit.clone().unwrap_or_default(),
            }
        }
        "livestatus" => {
            let space = match &req.LiveStatusSpace {
                Some(k) => Some(resolve::space(&mut tx, k).await?.SpaceID),
                None => None,
            };
            WebhookAction::LiveStatus { SpaceID: space }
        }
        other => {
            return Err(OpError::invalid("Action", other, "expected promote, attest, invoke or livestatus"));
        }
    };
    let now = Utc::now();
    let hook = Webhook {
        WebhookID: Uuid::new_v4(),
        SpaceID: sp.SpaceID,
        DisplayName: slug.to_string(),
        Slug: slug,
        Action: action,
        OwnerID: actor.id(),
        Version: 1,
        CreatedAt: now,
        UpdatedAt: now,
    };
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("whsec_{}", hex::encode(bytes));
    tx.insert(&hook).await?;
    tx.put_webhook_secret(hook.WebhookID, &secret).await?;
    tx.commit().await?;
    Ok(WebhookCreated { URL: format!("/v1/webhooks/{}", hook.WebhookID), Secret: secret, Webhook: hook })
}

/// Why a delivery was not acted on.
#[derive(Debug)]
pub enum DeliveryError {
    /// Unknown webhook, bad or missing signature, stale timestamp, replayed delivery: 401.
    Refused(&'static str),
    /// Authenticated, but the action failed.
    Action(OpError),
}

impl From<OpError> for DeliveryError {
    fn from(e: OpError) -> Self {
        DeliveryError::Action(e)
    }
}

impl From<crate::store::StoreError> for DeliveryError {
    fn from(e: crate::store::StoreError) -> Self {
        DeliveryError::Action(e.into())
    }
}

/// The value at a JSON pointer of a delivery's body, as a parameter string.
fn pointed(body: &Value, name: &str, pointer: &str) -> Result<String> {
    match body.pointer(pointer) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Null) | None => Err(OpError::invalid(
            format!("Parameters.{name}"),
            pointer,
            "the delivery's body has nothing at this JSON pointer",
        )),
        Some(other) => Ok(other.to_string()),
    }
}

/// An Argo CD notification's Application, as a live status update and the Application's name.
fn argo_status(body: &Value) -> Result<(String, super::LiveStatusUpdate)> {
    let app = body.get("app").unwrap_or(body);
    let text = |p: &str| app.pointer(p).and_then(Value::as_str).map(str::to_string);
    let name = text("/metadata/name").unwrap_or_default();
    let sync = text("/status/sync/status").ok_or_else(|| {
        OpError::invalid("status.sync.status", "", "not an Argo CD Application notification")
    })?;
    Ok((
        name,
        super::LiveStatusUpdate {
            Sync: sync,
            Operation: text("/status/operationState/phase").unwrap_or_else(|| "Unknown".into()),
            Health: text("/status/health/status").unwrap_or_else(|| "Unknown".into()),
            Message: text("/status/operationState/message"),
            ObservedAt: None,
        },
    ))
}

/// Verifies a delivery, records its ID, then runs the webhook's action as its owner. Promotions
/// are written to the store; the returned jobs go on the queue once this returns.
pub async fn deliver(
    store: &Store,
    webhook: Uuid,
    d: Delivery,
) -> std::result::Result<(Value, Vec<super::promotions::JobRef>), DeliveryError> {
    let mut tx = store.write().await?;
    let Some(hook) = tx.get::<Webhook>(webhook).await? else {
        return Err(DeliveryError::Refused("unknown webhook"));
    };
    let secret = tx.webhook_secret(webhook).await?.ok_or(DeliveryError::Refused("unknown webhook"))?;
    let id = verify(&secret, &d, Utc::now().timestamp()).map_err(DeliveryError::Refused)?;
    if !tx.accept_delivery(webhook, &id).await? {
        return Err(DeliveryError::Refused("delivery ID already seen"));
    }
    let owner =
        tx.get::<User>(hook.OwnerID).await?.ok_or(DeliveryError::Refused("the webhook's owner is gone"))?;
    tx.commit().await?;
    let actor = Actor { user: owner };
    tracing::info!(webhook = %hook.Slug, delivery = %id, "webhook delivery accepted");
    let source = format!("webhook:{}", hook.Slug);
    let payload = || -> Result<Value> {
        serde_json::from_slice(&d.body).map_err(|e| OpError::invalid("body", "", format!("not JSON: {e}")))
    };
    let change_order = |co_id: Uuid| async move {
        let mut tx = store.read().await?;
        let co = tx.must_get::<ChangeOrder>(co_id).await?;
        Ok::<_, OpError>((tx.must_get::<Space>(co.SpaceID).await?, co))
    };
    let mut jobs = vec![];
    let result = match hook.Action {
        WebhookAction::Promote { ChangeOrderID, TargetStage } => {
            let (base, co) = change_order(ChangeOrderID).await?;
            let req = super::promotions::PromotionRequest {
                TargetStage,
                IdempotencyKey: Some(format!("{source}:{id}")),
                ..Default::default()
            };
            let (p, j) = super::promotions::request_promotion(
                store,
                &actor,
                &base.SpaceID.to_string(),
                &co.ChangeOrderID.to_string(),
                req,
                &source,
                None,
            )
            .await?;
            jobs = j;
            serde_json::to_value(p).expect("promotions serialize")
        }
        WebhookAction::Attest { ChangeOrderID, SpaceID, Type } => {
            let req = super::CreateAttestation {
                ChangeOrder: ChangeOrderID.to_string(),
                Type: Some(Type),
                Note: format!("webhook {} delivery {id}", hook.Slug),
                ..Default::default()
            };
            let a = super::create_attestation(store, &actor, &SpaceID.to_string(), req).await?;
            serde_json::to_value(a).expect("attestations serialize")
        }
        WebhookAction::Invoke { InvocationID, Parameters, WhereSpace, WhereUnit } => {
            let body = payload()?;
            let mut params = std::collections::BTreeMap::new();
            for (name, pointer) in &Parameters {
                params.insert(name.clone(), pointed(&body, name, pointer)?);
            }
            let (inv, space) = {
                let mut tx = store.read().await?;
                let inv = tx.must_get::<crate::model::Invocation>(InvocationID).await?;
                let space = tx.must_get::<Space>(inv.SpaceID).await?;
                (inv, space)
            };
            let digest = hex::encode(&<Sha256 as sha2::Digest>::digest(id.as_bytes())[..5]);
            let slug: String =
                format!("{}-{digest}", hook.Slug.as_str().chars().take(40).collect::<String>());
            let req = super::CreateChangeOrder {
                Slug: slug.clone(),
                UpdateType: Some("Invoke".into()),
                WhereSpace: WhereSpace.clone(),
                Invocation: Some(format!("{}/{}", space.Slug, inv.Slug)),
                Parameters: params,
                WhereUnit: WhereUnit.clone(),
                Description: format!("from webhook {} delivery {id}", hook.Slug),
                ..Default::default()
            };
            let co = super::create_change_order(store, &actor, space.Slug.as_str(), req).await?;
            let req = super::promotions::PromotionRequest::default();
            let (p, j) = super::promotions::request_promotion(
                store,
                &actor,
                &space.SpaceID.to_string(),
                &slug,
                req,
                &source,
                None,
            )
            .await?;
            jobs = j;
            json!({"ChangeOrder": co, "Promotion": p})
        }
        WebhookAction::LiveStatus { SpaceID } => {
            let (name, update) = argo_status(&payload()?)?;
            let space = match SpaceID {
                Some(s) => s.to_string(),
                None if !name.is_empty() => name,
                None => {
                    return Err(OpError::invalid(
                        "metadata.name",
                        "",
                        "the notification names no Application",
                    )
                    .into());
                }
            };
            let r = super::set_live_status(store, &actor, &space, update).await?;
            serde_json::to_value(r).expect("releases serialize")
        }
    };
    Ok((json!({"Delivery": id, "Result": result}), jobs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &str, parts: &[&[u8]]) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret.as_bytes()).unwrap();
        for p in parts {
            mac.update(p);
        }
        format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
    }

    fn delivery(ts: i64, body: &[u8], sig: String) -> Delivery {
        Delivery {
            timestamp: Some(ts.to_string()),
            delivery_id: Some("d-1".into()),
            signature: Some(sig),
            github_signature: None,
            body: body.to_vec(),
        }
    }

    #[test]
    fn signatures_timestamps_and_ids() {
        let now = 1_800_000_000;
        let body = br#"{"image":"web:2"}"#;
        let good = sign("s3cret", &[now.to_string().as_bytes(), b".", body]);
        assert_eq!(verify("s3cret", &delivery(now, body, good.clone()), now), Ok("d-1".into()));
        assert_eq!(verify("other", &delivery(now, body, good.clone()), now), Err("bad signature"));
        assert_eq!(verify("s3cret", &delivery(now, b"{}", good.clone()), now), Err("bad signature"));
        let old = sign("s3cret", &[(now - 301).to_string().as_bytes(), b".", body]);
        assert!(verify("s3cret", &delivery(now - 301, body, old), now).is_err());
        let mut no_id = delivery(now, body, good.clone());
        no_id.delivery_id = None;
        assert!(verify("s3cret", &no_id, now).is_err());
        let gh = Delivery {
            delivery_id: Some("gh-1".into()),
            github_signature: Some(sign("s3cret", &[body])),
            body: body.to_vec(),
            ..Default::default()
        };
        assert_eq!(verify("s3cret", &gh, now), Ok("gh-1".into()));
        let unsigned = Delivery { delivery_id: Some("x".into()), body: body.to_vec(), ..Default::default() };
        assert_eq!(verify("s3cret", &unsigned, now), Err("unsigned delivery"));
        let mut garbled = delivery(now, body, "sha256=zz".into());
        garbled.timestamp = Some(now.to_string());
        assert_eq!(verify("s3cret", &garbled, now), Err("bad signature"));
    }
}
