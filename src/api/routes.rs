//! The route table and its handlers.

use super::auth::Auth;
use super::body::Body;
use super::error::ApiError;
use super::{ApiResult, AppState, ListQuery};
use crate::model::{Entity, Filter, Invocation, Link, Tag, Target};
use crate::ops;
use axum::Json;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

fn ok<T: serde::Serialize>(v: T) -> ApiResult {
    Ok(Json(v).into_response())
}

fn created<T: serde::Serialize>(v: T) -> ApiResult {
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// Builds the router over `state`, refusing request bodies over `max_body_bytes`.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/me", get(me))
        .route("/v1/functions", get(|| async { Json(ops::list_functions()) }))
        .route("/v1/users", get(list_users).post(create_user))
        .route("/v1/users/{user}/tokens", post(create_token))
        .route("/v1/spaces", get(list_spaces).post(create_space))
        .route("/v1/spaces/{space}", get(get_space).patch(update_space).delete(delete_space))
        .route("/v1/spaces/{space}/variants", post(create_variant))
        .route("/v1/spaces/{space}/promote", post(promote_variant))
        .route("/v1/units", get(list_units_all))
        .route("/v1/spaces/{space}/units", get(list_units).post(create_unit))
        .route(
            "/v1/spaces/{space}/units/{unit}",
            get(get_unit).patch(update_unit).put(update_unit).delete(delete_unit),
        )
        .route("/v1/spaces/{space}/units/{unit}/data", get(unit_data))
        .route("/v1/spaces/{space}/units/{unit}/revisions", get(list_revisions))
        .route("/v1/spaces/{space}/units/{unit}/conflicts", get(unit_conflicts))
        .route("/v1/spaces/{space}/units/{unit}/upgrade", post(upgrade_unit))
        .route("/v1/spaces/{space}/functions/do", post(function_do))
        .route("/v1/spaces/{space}/invoke", post(run_invocation))
        .route("/v1/spaces/{space}/links", get(list_in::<Link>).post(create_link))
        .route("/v1/spaces/{space}/links/{key}", get(get_in::<Link>).delete(delete_in::<Link>))
        .route("/v1/spaces/{space}/tags", get(list_in::<Tag>).post(create_tag))
        .route("/v1/spaces/{space}/tags/{key}", get(get_in::<Tag>).delete(delete_in::<Tag>))
        .route("/v1/spaces/{space}/filters", get(list_in::<Filter>).post(create_filter))
        .route("/v1/spaces/{space}/filters/{key}", get(get_in::<Filter>).delete(delete_in::<Filter>))
        .route("/v1/spaces/{space}/targets", get(list_in::<Target>).post(create_target))
        .route("/v1/spaces/{space}/targets/{key}", get(get_in::<Target>).delete(delete_in::<Target>))
        .route("/v1/spaces/{space}/invocations", get(list_in::<Invocation>).post(create_invocation))
        .route(
            "/v1/spaces/{space}/invocations/{key}",
            get(get_in::<Invocation>).delete(delete_in::<Invocation>),
        )
        .route("/v1/links", get(list_all::<Link>))
        .route("/v1/tags", get(list_all::<Tag>))
        .route("/v1/filters", get(list_all::<Filter>))
        .route("/v1/targets", get(list_all::<Target>))
        .route("/v1/invocations", get(list_all::<Invocation>))
        .merge(super::releases::routes())
        .merge(super::changeorders::routes())
        .merge(super::attestations::routes())
        .merge(super::workflows::routes())
        .merge(super::webhooks::routes())
        .merge(super::promotions::routes())
        .fallback(|| async {
            ApiError {
                status: StatusCode::NOT_FOUND,
                error: "no such endpoint".into(),
                field: None,
                value: None,
                gates: None,
            }
        })
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

async fn me(Auth(actor): Auth) -> ApiResult {
    ok(actor.user)
}

async fn list_users(State(s): State<AppState>, Auth(a): Auth) -> ApiResult {
    ok(ops::list_users(&s.store, &a).await?)
}

async fn create_user(
    State(s): State<AppState>,
    Auth(a): Auth,
    Body(req): Body<ops::CreateUser>,
) -> ApiResult {
    created(ops::create_user(&s.store, &a, req).await?)
}

async fn create_token(State(s): State<AppState>, Auth(a): Auth, Path(user): Path<String>) -> ApiResult {
    let token = ops::create_token(&s.store, &a, &user).await?;
    created(json!({"Token": token}))
}

async fn list_spaces(State(s): State<AppState>, Auth(a): Auth, Query(q): Query<ListQuery>) -> ApiResult {
    ok(ops::list_spaces(&s.store, &a, q.where_.as_deref()).await?)
}

async fn create_space(
    State(s): State<AppState>,
    Auth(a): Auth,
    Body(req): Body<ops::CreateSpace>,
) -> ApiResult {
    created(ops::create_space(&s.store, &a, req).await?)
}

async fn get_space(State(s): State<AppState>, Auth(a): Auth, Path(space): Path<String>) -> ApiResult {
    ok(ops::get_space(&s.store, &a, &space).await?)
}

async fn update_space(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::UpdateSpace>,
) -> ApiResult {
    ok(ops::update_space(&s.store, &a, &space, req).await?)
}

async fn delete_space(State(s): State<AppState>, Auth(a): Auth, Path(space): Path<String>) -> ApiResult {
    ops::delete_space(&s.store, &a, &space).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn create_variant(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::CreateVariant>,
) -> ApiResult {
    created(ops::create_variant(&s.store, &a, &space, req).await?)
}

#[allow(non_snake_case)]
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct PromoteBody {
    #[serde(default)]
    Squash: bool,
}

async fn promote_variant(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<PromoteBody>,
) -> ApiResult {
    ok(ops::promote_variant(&s.store, &a, &space, req.Squash).await?)
}

async fn list_units_all(State(s): State<AppState>, Auth(a): Auth, Query(q): Query<ListQuery>) -> ApiResult {
    ok(ops::list_units(&s.store, &a, q.space.as_deref(), q.where_.as_deref()).await?)
}

async fn list_units(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    ok(ops::list_units(&s.store, &a, Some(&space), q.where_.as_deref()).await?)
}

async fn create_unit(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::CreateUnit>,
) -> ApiResult {
    created(ops::create_unit(&s.store, &a, &space, req).await?)
}

async fn get_unit(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
) -> ApiResult {
    ok(ops::get_unit(&s.store, &a, &space, &unit).await?)
}

async fn update_unit(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
    Body(req): Body<ops::UpdateUnit>,
) -> ApiResult {
    ok(ops::update_unit(&s.store, &a, &space, &unit, req).await?)
}

async fn delete_unit(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
) -> ApiResult {
    ops::delete_unit(&s.store, &a, &space, &unit).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[derive(Debug, Deserialize)]
struct DataQuery {
    revision: Option<i64>,
}

async fn unit_data(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
    Query(q): Query<DataQuery>,
) -> ApiResult {
    let data = ops::unit_data(&s.store, &a, &space, &unit, q.revision).await?;
    Ok(([(header::CONTENT_TYPE, "application/yaml")], data).into_response())
}

async fn list_revisions(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
) -> ApiResult {
    ok(ops::list_revisions(&s.store, &a, &space, &unit).await?)
}

async fn unit_conflicts(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
) -> ApiResult {
    ok(ops::get_unit(&s.store, &a, &space, &unit).await?.Conflicts)
}

async fn upgrade_unit(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, unit)): Path<(String, String)>,
    Body(req): Body<ops::UpgradeRequest>,
) -> ApiResult {
    ok(ops::upgrade_unit(&s.store, &a, &space, &unit, req).await?)
}

async fn function_do(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::FunctionDo>,
) -> ApiResult {
    ok(ops::function_do(&s.store, &a, &space, req).await?)
}

async fn run_invocation(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Body(req): Body<ops::RunInvocation>,
) -> ApiResult {
    ok(ops::run_invocation(&s.store, &a, &space, req).await?)
}

async fn list_in<E: Entity>(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path(space): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    ok(ops::list_in_space::<E>(&s.store, &a, Some(&space), q.where_.as_deref()).await?)
}

async fn list_all<E: Entity>(
    State(s): State<AppState>,
    Auth(a): Auth,
    Query(q): Query<ListQuery>,
) -> ApiResult {
    ok(ops::list_in_space::<E>(&s.store, &a, q.space.as_deref(), q.where_.as_deref()).await?)
}

async fn get_in<E: Entity>(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, key)): Path<(String, String)>,
) -> ApiResult {
    ok(ops::get_in_space::<E>(&s.store, &a, &space, &key).await?)
}

async fn delete_in<E: Entity>(
    State(s): State<AppState>,
    Auth(a): Auth,
    Path((space, key)): Path<(String, String)>,
) -> ApiResult {
    ops::delete_in_space::<E>(&s.store, &a, &space, &key).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

macro_rules! create_handler {
    ($name:ident, $req:ty, $op:path) => {
        async fn $name(
            State(s): State<AppState>,
            Auth(a): Auth,
            Path(space): Path<String>,
            Body(req): Body<$req>,
        ) -> ApiResult {
            created($op(&s.store, &a, &space, req).await?)
        }
    };
}

create_handler!(create_tag, ops::CreateTag, ops::create_tag);
create_handler!(create_filter, ops::CreateFilter, ops::create_filter);
create_handler!(create_target, ops::CreateTarget, ops::create_target);
create_handler!(create_link, ops::CreateLink, ops::create_link);
create_handler!(create_invocation, ops::CreateInvocation, ops::create_invocation);
