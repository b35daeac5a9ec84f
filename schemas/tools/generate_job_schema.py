#!/usr/bin/env python3
"""Generate schemas/job.v1.schema.json (JSON Schema 2020-12 for `herald.job.v1`).

Usage: python3 schemas/tools/generate_job_schema.py [--check]

The job schema is generated, not hand-written, because an audience filter may nest at most
16 levels (Sources/HeraldCore/AudienceFilter.swift) and JSON Schema cannot count depth: the
filter is unrolled into `$defs/filter_1` ... `$defs/filter_16`, where level k allows the leaf
predicates plus (for k < 16) `and`/`or`/`not` nodes whose children are level k + 1.

The output is deterministic (sorted keys, 2-space indent, trailing newline), so a diff of the
generated file shows exactly what changed. With --check nothing is written; the exit status
is 1 when the file on disk differs from what would be generated.

The rules mirror the Swift validators in Sources/HeraldCore (Job.swift, AudienceFilter.swift,
Identifiers.swift, JSONObjectReader.swift, Timestamp.swift). Change them together.
Python 3 standard library only.
"""

import json
import sys
from pathlib import Path

OUTPUT = Path(__file__).resolve().parent.parent / "job.v1.schema.json"

MAX_FILTER_DEPTH = 16          # AudienceFilter.maxDepth
MAX_FILTER_CHILDREN = 100      # AudienceFilter.maxChildren
MAX_LIST_VALUES = 10_000       # AudienceFilter.maxListValues
MAX_TAG_VALUE_LENGTH = 1024    # AudienceFilter.maxTagValueLength
MAX_EXPLICIT_IDS = 10_000      # Job.maxExplicitIDs
MAX_SEQUENCE = 9_007_199_254_740_991  # LiveActivityUpdate.maxSequence (2^53 - 1)
MAX_TTL_SECONDS = 2_419_200    # VoIPPayload.maxTTLSeconds (28 days)
INT32_MAX = 2_147_483_647

FILTER_PREDICATES = ["and", "or", "not", "tag", "language", "platform", "external_id",
                     "near", "last_session", "session_count"]

# RFC 3339 date-time as Timestamp(rfc3339:) reads it: year 0001-9999, month lengths (February
# up to 29; whether the 29th exists in that year is left to Herald), hour 00-23, minute 00-59,
# second 00-60 (a leap second), optional fraction, Z or an offset up to +-23:59; `T`, `t` or a
# space between date and time. At most 40 characters in all.
TIMESTAMP_PATTERN = (
    "^([0-9]{3}[1-9]|[0-9]{2}[1-9][0-9]|[0-9][1-9][0-9]{2}|[1-9][0-9]{3})-"
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-9]))"
    "[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
    "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"
)

CHECKED_BEYOND = [
    "the whole job is at most 256 KiB (262,144 bytes) of strict JSON: UTF-8, no duplicate member "
    "names (Herald compares names by Unicode canonical equivalence), arrays and objects nested at "
    "most 64 levels (this includes `content.data`, `apns`, `fcm`, `content_state` and "
    "`attributes`), number literals at most 64 characters and finite as a double (`1e400` is "
    "refused)",
    "`content.collapse_id` is at most 64 bytes of UTF-8 (APNs counts bytes; the schema can only "
    "say 64 characters)",
    "timestamps name a real calendar day: February 29 only in leap years",
    "an integer written with an exponent or a fraction (`1e17`, `5.0`) counts only when it is "
    "exactly representable, i.e. at most 2^53 in magnitude; plain digits are exact up to 2^63 - 1",
    "a job with 10,000 explicit ids cannot fit in 256 KiB if they are UUIDs (about 6,700 fit); "
    "the size limit wins",
    "an audience filter has at most 256 nodes (every `and`, `or`, `not` and predicate counts one) "
    "and at most 32 costly predicates (`near`, and `tag` with `gt`, `gte`, `lt` or `lte`), "
    "which JSON Schema cannot count (AudienceFilter.maxNodes, maxCostlyPredicates)",
    "no string and no member name holds U+0000 (PostgreSQL's jsonb cannot store it)",
]


def ref(name):
    return {"$ref": f"#/$defs/{name}"}


def described(description, schema):
    out = dict(schema)
    out["description"] = description
    return out


def string(min_length=None, max_length=None, pattern=None):
    out = {"type": "string"}
    if min_length is not None:
        out["minLength"] = min_length
    if max_length is not None:
        out["maxLength"] = max_length
    if pattern is not None:
        out["pattern"] = pattern
    return out


def integer(minimum, maximum):
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def number(minimum, maximum, exclusive_minimum=False):
    out = {"type": "number", "maximum": maximum}
    if exclusive_minimum:
        out["exclusiveMinimum"] = minimum
    else:
        out["minimum"] = minimum
    return out


BOOLEAN = {"type": "boolean"}


def shared_defs():
    return {
        "timestamp": described(
            "An RFC 3339 date-time such as `2026-12-02T17:34:19Z` or "
            "`2026-12-02T18:34:19.250+01:00`. A lower-case `t`/`z` and a space instead of `T` are "
            "accepted (RFC 3339 section 5.6), as is a leap second (`:60`, read as the next second). "
            "Years 0001-9999; at most 40 characters. Herald also refuses days that do not exist "
            "(February 29 outside leap years), which this pattern cannot see.",
            {**string(max_length=40, pattern=TIMESTAMP_PATTERN), "format": "date-time"}),
        "job_id": described(
            "1-64 characters of `A-Z a-z 0-9 . _ : -`.",
            string(min_length=1, max_length=64, pattern="^[A-Za-z0-9._:-]{1,64}$")),
        "app_id": described(
            "A slug: 1-64 characters of `a-z 0-9 _ -`.",
            string(min_length=1, max_length=64, pattern="^[a-z0-9_-]{1,64}$")),
        "subscription_id": described(
            "A subscription id: a UUID in 8-4-4-4-12 hex form, either case "
            "(Herald lower-cases it).",
            string(min_length=36, max_length=36,
                   pattern="^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")),
        "external_id": described(
            "The app's own user id: 1-256 characters.",
            string(min_length=1, max_length=256)),
        "language": described(
            "A language tag such as `en`, `pt-BR` or `zh-Hant-TW`: 2-3 letters, then any number of "
            "`-` and 2-8 letters or digits; at most 35 characters. Compared case-insensitively.",
            string(min_length=2, max_length=35, pattern="^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})*$")),
        "link": described(
            "A URI with a scheme that a tap opens: `https://example.com/x` or an app's deep link "
            "`myapp://orders/42`. No spaces or control characters; at most 2048 characters.",
            string(min_length=1, max_length=2048, pattern="^[A-Za-z][A-Za-z0-9+.-]*:[^\\x00-\\x20]+$")),
        "image_url": described(
            "An `http` or `https` URL of an image; no spaces or control characters; at most 2048 "
            "characters.",
            string(min_length=1, max_length=2048, pattern="^[Hh][Tt][Tt][Pp][Ss]?://[^\\x00-\\x20]+$")),
        "action_id": described(
            "A button or action id: 1-64 characters of `A-Z a-z 0-9 . _ -`.",
            string(min_length=1, max_length=64, pattern="^[A-Za-z0-9._-]{1,64}$")),
        "activity_id": described(
            "1-128 characters of `A-Z a-z 0-9 . _ : -`.",
            string(min_length=1, max_length=128, pattern="^[A-Za-z0-9._:-]{1,128}$")),
        "clock_time": described(
            "A time of day `HH:MM`, 00:00 to 23:59.",
            string(min_length=5, max_length=5, pattern="^([01][0-9]|2[0-3]):[0-5][0-9]$")),
        "short_text": described(
            "A non-empty string of at most 256 characters.",
            string(min_length=1, max_length=256)),
    }


def content_defs():
    localized_text = {
        "type": "object",
        "description": "Title, subtitle and body in one language. Each member is optional; a "
                       "missing one falls back to the job's default-language text.",
        "properties": {
            "title": described("The title in this language.", {"type": "string"}),
            "subtitle": described("The subtitle in this language (iOS).", {"type": "string"}),
            "body": described("The body in this language.", {"type": "string"}),
        },
    }
    button = {
        "type": "object",
        "description": "A button on the notification.",
        "required": ["id", "text"],
        "properties": {
            "id": described("The button's action id, reported back in `clicked` receipts.",
                            ref("action_id")),
            "text": described("The button label: 1-64 characters.", string(1, 64)),
            "url": described("What tapping the button opens; absent: the app decides.", ref("link")),
        },
    }
    sound = {
        "description": "A sound: a file name in the app bundle (or `default`), 1-256 characters; "
                       "or `{name, critical, volume}` for a critical alert (iOS; the app needs "
                       "Apple's critical-alert entitlement).",
        "oneOf": [
            string(1, 256),
            {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": described("The sound file name, 1-256 characters.", string(1, 256)),
                    "critical": described("Play as a critical alert (ignores mute and Focus). "
                                          "Default false.", BOOLEAN),
                    "volume": described("Critical alert volume, 0 to 1. Default 1.", number(0, 1)),
                },
            },
        ],
    }
    content = {
        "type": "object",
        "description": "What a `notification` job shows. Needs a non-empty `title` or a non-empty "
                       "`body`, unless `content_available` is true (a background push).",
        "properties": {
            "title": described("Default-language title. Any string; see the rule above.",
                               {"type": "string"}),
            "subtitle": described("Default-language subtitle (iOS).", {"type": "string"}),
            "body": described("Default-language body. Truncated (UTF-8 intact) when the platform "
                              "payload would be too large.", {"type": "string"}),
            "localized": {
                "type": "object",
                "description": "Per-language text, keyed by language tag (`fr`, `pt-BR`). Herald "
                               "picks an exact match for the subscription's language, then the "
                               "language without its region (`pt-br` -> `pt`), then the defaults.",
                "propertyNames": ref("language"),
                "additionalProperties": ref("localized_text"),
            },
            "data": {"description": "App data, any JSON value (null included), passed to the app "
                                    "as JSON (see schemas/payloads.md)."},
            "url": described("What tapping the notification opens.", ref("link")),
            "image_url": described("An image shown with the notification (rich notification).",
                                   ref("image_url")),
            "buttons": {
                "type": "array",
                "description": "Up to 3 buttons.",
                "maxItems": 3,
                "items": ref("button"),
            },
            "sound": ref("sound"),
            "badge": described("The app icon badge (iOS); 0 clears it. 0-99999.",
                               integer(0, 99_999)),
            "thread_id": described("Groups notifications on the device (iOS `thread-id`); "
                                   "1-256 characters.", ref("short_text")),
            "collapse_id": described("A newer notification with the same collapse id replaces "
                                     "the older one. 1-64 characters and at most 64 bytes of UTF-8 "
                                     "(Herald checks the bytes).", string(1, 64)),
            "category": described("The notification category (iOS `category`, Android "
                                  "`click_action`); 1-256 characters.", ref("short_text")),
            "channel": described("The Android notification channel: the key of one of the app's "
                                 "channels, a slug of 1-64 characters of `a-z 0-9 _ -`.",
                                 string(1, 64, "^[a-z0-9_-]{1,64}$")),
            "interruption_level": described("iOS 15+ interruption level.",
                                            {"type": "string",
                                             "enum": ["passive", "active", "time-sensitive",
                                                      "critical"]}),
            "relevance_score": described("iOS summary ordering, 0 to 1.", number(0, 1)),
            "content_available": described("A background push that wakes the app "
                                           "(`content-available: 1`). Default false.", BOOLEAN),
            "show_foreground": described("SDK subscriptions: show the notification while the app "
                                         "is in the foreground. Absent: the SDK decides.", BOOLEAN),
            "show_background": described("SDK subscriptions: show the notification while the app "
                                         "is in the background. Absent: the SDK decides.", BOOLEAN),
            "apns": described("Raw APNs payload members, merged into the payload last.",
                              {"type": "object"}),
            "fcm": described("Raw FCM message members, merged into the message last.",
                             {"type": "object"}),
        },
        "anyOf": [
            {"required": ["title"], "properties": {"title": {"minLength": 1}}},
            {"required": ["body"], "properties": {"body": {"minLength": 1}}},
            {"required": ["content_available"], "properties": {"content_available": {"const": True}}},
        ],
    }
    return {
        "localized_text": localized_text,
        "button": button,
        "sound": sound,
        "notification_content": content,
    }


def live_activity_def():
    alert = {
        "type": "object",
        "description": "An alert shown with the update (required for `start`).",
        "required": ["title", "body"],
        "properties": {
            "title": described("Alert title, non-empty.", string(1)),
            "body": described("Alert body, non-empty.", string(1)),
            "sound": described("Alert sound file name, 1-256 characters.", ref("short_text")),
        },
    }
    live = {
        "type": "object",
        "description": "What a `live_activity` job carries. An `update` on the activity's current "
                       "stream whose `sequence` is not greater than the last accepted one is "
                       "dropped (`stale-sequence`); a different `stream_id` starts new numbering.",
        "required": ["activity_id", "event", "stream_id", "sequence", "content_state"],
        "properties": {
            "activity_id": described("The activity, as the app registered it.", ref("activity_id")),
            "event": described("`start` (push-to-start), `update` or `end`.",
                               {"type": "string", "enum": ["start", "update", "end"]}),
            "stream_id": described("The numbering session: a server session id, or `direct` for "
                                   "a session-less test send numbered by clock.",
                                   ref("activity_id")),
            "sequence": described("Order within the stream: 0 to 2^53 - 1.",
                                  integer(0, MAX_SEQUENCE)),
            "content_state": described("The activity's `ContentState`, as the app decodes it.",
                                       {"type": "object"}),
            "alert": ref("live_activity_alert"),
            "attributes_type": described(
                "The Swift type name of the activity's attributes (`start`): "
                "`[A-Za-z_][A-Za-z0-9_.]*`, at most 128 characters.",
                string(1, 128, "^[A-Za-z_][A-Za-z0-9_.]*$")),
            "attributes": described("The activity's attributes (`start`).", {"type": "object"}),
            "dismissal_date": described("When an ended activity leaves the Lock Screen.",
                                        ref("timestamp")),
            "stale_date": described("When the activity is shown as out of date.", ref("timestamp")),
            "relevance_score": described("Ordering among the app's activities, 0 to 1000000.",
                                         number(0, 1_000_000)),
            "priority": described("APNs priority: 5 (does not count against the budget) or 10. "
                                  "Default 5 for `update`, 10 for `start` and `end`.",
                                  {"type": "integer", "enum": [5, 10]}),
        },
        "allOf": [
            {
                "if": {"required": ["event"], "properties": {"event": {"const": "start"}}},
                "then": {"required": ["alert", "attributes_type", "attributes"]},
            }
        ],
    }
    return {"live_activity_alert": alert, "live_activity": live}


def voip_def():
    return {
        "type": "object",
        "description": "What a `voip` job carries. May be empty.",
        "properties": {
            "data": {
                "type": "object",
                "description": "String values delivered to the app's VoIP handler.",
                "additionalProperties": {"type": "string"},
            },
            "ttl_s": described("Seconds the push stays deliverable, 0 to 2419200 (28 days); "
                               "absent: the provider's default.", integer(0, MAX_TTL_SECONDS)),
        },
    }


def delivery_def():
    return {
        "type": "object",
        "description": "When and how fast. Absent: now, campaign lane, unthrottled. `local_time` "
                       "and `best_hour: true` cannot be combined.",
        "properties": {
            "priority": described("Provider delivery priority: `high` (deliver now, may wake the "
                                  "device) or `normal` (may be delayed to save power).",
                                  {"type": "string", "enum": ["high", "normal"]}),
            "urgent": described("Use the urgent lane (one-time codes), drained before campaigns. "
                                "Default false.", BOOLEAN),
            "send_after": described("Not before this instant.", ref("timestamp")),
            "local_time": described("Deliver at this time of day in each device's time zone.",
                                    ref("clock_time")),
            "same_day_only": described("With `local_time`: if that time has already passed "
                                       "today for a device, skip it instead of waiting for "
                                       "tomorrow. Default false.", BOOLEAN),
            "respect_quiet_hours": described("Hold deliveries that fall in a device's quiet "
                                             "hours until they end. Absent: the app's default "
                                             "(`apps.respect_quiet_hours`, false unless the app "
                                             "opts in). Urgent jobs and live activities are never "
                                             "held.", BOOLEAN),
            "best_hour": described("Deliver at each device's most active hour (from its "
                                   "activity histogram). Default false.", BOOLEAN),
            "throttle_per_minute": described("At most this many sends per minute for the job, "
                                             "1 to 100000000.", integer(1, 100_000_000)),
        },
        "not": {
            "required": ["local_time", "best_hour"],
            "properties": {"best_hour": {"const": True}},
        },
    }


def audience_def():
    return {
        "type": "object",
        "description": "Who receives the job: exactly one of `subscription_ids`, `external_ids`, "
                       "`filter`, `all` (a member that is present counts, even as null). Opted-out "
                       "and invalidated subscriptions are never targeted, whatever the audience "
                       "says.",
        "properties": {
            "subscription_ids": {
                "type": "array",
                "description": "These subscriptions: 1-10000 UUIDs (repeats are sent once). Each "
                               "listed id gets exactly one terminal receipt: one that is no "
                               "subscription of the app is `dropped`/`unknown-subscription`, one "
                               "opted out or invalidated (before or after planning) is "
                               "`dropped`/`opted-out`.",
                "minItems": 1,
                "maxItems": MAX_EXPLICIT_IDS,
                "items": ref("subscription_id"),
            },
            "external_ids": {
                "type": "array",
                "description": "Every subscription of these users: 1-10000 external ids "
                               "(repeats are sent once).",
                "minItems": 1,
                "maxItems": MAX_EXPLICIT_IDS,
                "items": ref("external_id"),
            },
            "filter": described("Every subscription the filter matches. See `filter_1`.",
                                ref("filter_1")),
            "all": described("Every subscription of the app. Must be `true`.", {"const": True}),
        },
        "oneOf": [
            {"required": ["subscription_ids"]},
            {"required": ["external_ids"]},
            {"required": ["filter"]},
            {"required": ["all"]},
        ],
    }


def leaf_defs():
    """Filter leaf predicates. Filter nodes are strict: exactly one predicate key, nothing else
    (a `tag` node has exactly `tag`, `op` and, except for exists/not_exists, `value`)."""
    def node(key, description, value_schema):
        return {
            "type": "object",
            "description": description,
            "required": [key],
            "properties": {key: value_schema},
            "additionalProperties": False,
        }

    tag = {
        "type": "object",
        "description": "A tag comparison `{tag, op, value}`, or a presence test `{tag, op}` with "
                       "op `exists`/`not_exists` (no `value`). A tag whose value is `\"\"` "
                       "counts as deleted: it compares like a missing tag, so `eq \"\"` matches "
                       "nothing and `not_exists` is true for it. `eq`/`ne` compare string tags: a "
                       "list tag never equals a string (`ne` is true for it); `contains` is the "
                       "test for list tags. `gt`/`gte`/`lt`/`lte` compare numerically when both "
                       "sides are numbers (`-?digits[.digits]`), else byte-wise; a list tag, a "
                       "missing tag or a deleted one is never greater or less.",
        "required": ["tag", "op"],
        "properties": {
            "tag": described("The tag key, 1-128 characters.", string(1, 128)),
            "op": described("The comparison.",
                            {"type": "string",
                             "enum": ["eq", "ne", "contains", "gt", "gte", "lt", "lte", "exists",
                                      "not_exists"]}),
            "value": described("The value to compare with, at most 1024 characters (may be "
                               "empty). Required for eq/ne/contains/gt/gte/lt/lte, forbidden for "
                               "exists/not_exists.", string(max_length=MAX_TAG_VALUE_LENGTH)),
        },
        "additionalProperties": False,
        "if": {"required": ["op"], "properties": {"op": {"enum": ["exists", "not_exists"]}}},
        "then": {"not": {"required": ["value"]}},
        "else": {"required": ["value"]},
    }
    language = node("language", "Subscriptions whose language is one of these or a longer form "
                    "of one (RFC 4647 basic filtering): `en` matches `en`, `en-GB` and `en-US`; "
                    "`en-GB` matches `en-GB` and `en-GB-…` but not `en`. Devices without a "
                    "language never match (and so match its `not`).", {
        "type": "array", "minItems": 1, "maxItems": MAX_LIST_VALUES, "items": ref("language"),
    })
    platform = node("platform", "Subscriptions on one of these platforms.", {
        "type": "array", "minItems": 1, "maxItems": 2,
        "items": {"type": "string", "enum": ["ios", "android"]},
    })
    external_id = node("external_id", "Subscriptions of one of these users.", {
        "type": "array", "minItems": 1, "maxItems": MAX_LIST_VALUES, "items": ref("external_id"),
    })
    near = node("near", "Subscriptions within `radius_m` metres (great-circle distance) of a point.", {
        "type": "object",
        "required": ["lat", "long", "radius_m"],
        "properties": {
            "lat": described("Latitude, -90 to 90.", number(-90, 90)),
            "long": described("Longitude, -180 to 180.", number(-180, 180)),
            "radius_m": described("Radius in metres: greater than 0, at most 20100000.",
                                  number(0, 20_100_000, exclusive_minimum=True)),
        },
    })
    last_session = node("last_session", "Subscriptions whose last session was after and/or "
                                        "before the given instants.", {
        "type": "object",
        "properties": {
            "after": described("Last session after this instant.", ref("timestamp")),
            "before": described("Last session before this instant.", ref("timestamp")),
        },
        "anyOf": [{"required": ["after"]}, {"required": ["before"]}],
    })
    session_count = node("session_count", "Subscriptions by number of sessions.", {
        "type": "object",
        "required": ["op", "value"],
        "properties": {
            "op": described("The comparison.",
                            {"type": "string", "enum": ["eq", "gt", "gte", "lt", "lte"]}),
            "value": described("The count, 0 to 2147483647.", integer(0, INT32_MAX)),
        },
    })
    return {
        "filter_tag": tag,
        "filter_language": language,
        "filter_platform": platform,
        "filter_external_id": external_id,
        "filter_near": near,
        "filter_last_session": last_session,
        "filter_session_count": session_count,
        "filter_leaf": {
            "description": "Any leaf predicate (a filter node without children).",
            "oneOf": [ref("filter_tag"), ref("filter_language"), ref("filter_platform"),
                      ref("filter_external_id"), ref("filter_near"), ref("filter_last_session"),
                      ref("filter_session_count")],
        },
    }


def level_defs():
    """filter_1 ... filter_16: the same node shapes, with children one level deeper."""
    defs = {}
    for level in range(1, MAX_FILTER_DEPTH + 1):
        name = f"filter_{level}"
        if level == MAX_FILTER_DEPTH:
            defs[name] = {
                "description": f"A filter node at depth {level}, the deepest allowed: "
                               "leaf predicates only.",
                "$ref": "#/$defs/filter_leaf",
            }
            continue
        child = ref(f"filter_{level + 1}")
        children = {"type": "array", "minItems": 1, "maxItems": MAX_FILTER_CHILDREN,
                    "items": child}

        def node(key, schema):
            return {"type": "object", "required": [key], "properties": {key: schema},
                    "additionalProperties": False}

        description = (f"A filter node at depth {level} (a lone predicate is depth 1; at most "
                       f"{MAX_FILTER_DEPTH}). One of " + ", ".join(f"`{p}`" for p in FILTER_PREDICATES)
                       + ": `{\"and\": [F, ...]}` and `{\"or\": [F, ...]}` take 1-100 children, "
                       "`{\"not\": F}` one.")
        defs[name] = {
            "description": description,
            "oneOf": [
                ref("filter_leaf"),
                node("and", described("All of these match.", children)),
                node("or", described("At least one of these matches.", children)),
                node("not", described("This does not match.", child)),
            ],
        }
    return defs


EXAMPLES = [
    {
        "schema": "herald.job.v1",
        "id": "order-shipped:8f3a2c",
        "app_id": "shop",
        "kind": "notification",
        "created_at": "2026-12-02T17:34:19Z",
        "audience": {"external_ids": ["user-1842"]},
        "content": {
            "title": "Your order has shipped",
            "body": "Order #4821 is on its way and should arrive on Friday.",
            "url": "shop://orders/4821",
            "localized": {"fr": {"title": "Votre commande est partie",
                                 "body": "La commande n° 4821 arrivera vendredi."}},
            "data": {"order_id": 4821},
        },
    },
    {
        "schema": "herald.job.v1",
        "id": "winter-sale-2026",
        "app_id": "shop",
        "kind": "notification",
        "created_at": "2026-12-01T09:00:00Z",
        "expires_at": "2026-12-03T09:00:00Z",
        "audience": {"filter": {"and": [
            {"platform": ["ios", "android"]},
            {"tag": "vip", "op": "eq", "value": "true"},
            {"not": {"tag": "unsubscribed_promos", "op": "exists"}},
        ]}},
        "content": {
            "title": "Winter sale",
            "body": "30% off everything until Sunday.",
            "image_url": "https://cdn.example.com/sale.jpg",
            "buttons": [{"id": "shop-now", "text": "Shop now", "url": "https://example.com/sale"}],
            "channel": "promotions",
        },
        "delivery": {"local_time": "10:00", "respect_quiet_hours": True,
                     "throttle_per_minute": 50000},
    },
    {
        "schema": "herald.job.v1",
        "id": "match-2291:update:17",
        "app_id": "scores",
        "kind": "live_activity",
        "created_at": "2026-12-02T20:15:03Z",
        "live_activity": {
            "activity_id": "match-2291",
            "event": "update",
            "stream_id": "session-7f2c",
            "sequence": 17,
            "content_state": {"home": 2, "away": 1, "minute": 67},
        },
    },
    {
        "schema": "herald.job.v1",
        "id": "call-5c1e9d",
        "app_id": "talk",
        "kind": "voip",
        "created_at": "2026-12-02T17:40:00Z",
        "audience": {"subscription_ids": ["0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"]},
        "voip": {"data": {"call_id": "5c1e9d", "caller": "Ada"}, "ttl_s": 30},
        "delivery": {"urgent": True, "priority": "high"},
    },
]


def build():
    defs = {}
    defs.update(shared_defs())
    defs.update(content_defs())
    defs.update(live_activity_def())
    defs["voip"] = voip_def()
    defs["delivery"] = delivery_def()
    defs["audience"] = audience_def()
    defs.update(leaf_defs())
    defs.update(level_defs())

    def kind_is(kind):
        return {"required": ["kind"], "properties": {"kind": {"const": kind}}}

    description = (
        "GENERATED by schemas/tools/generate_job_schema.py; do not edit by hand (change the "
        "generator and run it again).\n\n"
        "A send job (`herald.job.v1`) as the upstream API produces it to `herald.jobs`. Members "
        "Herald does not know are ignored, so a newer producer does not break an older worker; "
        "filter nodes are the exception (an unknown predicate would silently widen the audience). "
        "Optional members may be absent but not null (except `content.data`, which is any JSON). "
        "`content`, `live_activity` and `voip` are read only for their own `kind`.\n\n"
        "Checked by Herald beyond this schema:\n"
        + "\n".join(f"- {item}" for item in CHECKED_BEYOND)
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://herald.dev/schemas/job.v1.schema.json",
        "title": "Herald send job (herald.job.v1)",
        "description": description,
        "type": "object",
        "required": ["schema", "id", "app_id", "kind", "created_at"],
        "properties": {
            "schema": described("The message type and version. Any other value is refused.",
                                {"const": "herald.job.v1"}),
            "id": described("The idempotency key: replaying a job id never fans out twice. "
                            "1-64 characters of `A-Z a-z 0-9 . _ : -`.", ref("job_id")),
            "app_id": described("The app the job is for (a slug).", ref("app_id")),
            "kind": described("What is sent: a visible or background `notification`, a "
                              "`live_activity` start/update/end, or a `voip` push.",
                              {"type": "string", "enum": ["notification", "live_activity", "voip"]}),
            "created_at": described("When the producer created the job.", ref("timestamp")),
            "expires_at": described("Deliveries not made by then are dropped (`expired`).",
                                    ref("timestamp")),
            "test": described("A test send, counted apart in metrics. Default false.", BOOLEAN),
            "audience": described("Required, except for `live_activity` jobs with event `update` "
                                  "or `end`, which go to the activity's own tokens.",
                                  ref("audience")),
            "content": {"description": "Required for kind `notification` (see "
                                       "`$defs/notification_content`); ignored for other kinds."},
            "live_activity": {"description": "Required for kind `live_activity` (see "
                                             "`$defs/live_activity`); ignored for other kinds."},
            "voip": {"description": "Required for kind `voip` (see `$defs/voip`); ignored for "
                                    "other kinds."},
            "parent_id": described(
                "Set by Herald only, on a sub-job it derived from a scheduled job (send_after, "
                "local_time, respect_quiet_hours, best_hour; docs/SCHEDULING.md): the job the user "
                "sent. Receipts and device payloads carry this id; producers never set it.",
                ref("job_id")),
            "delivery": ref("delivery"),
        },
        "allOf": [
            {"if": kind_is("notification"),
             "then": {"required": ["content", "audience"],
                      "properties": {"content": ref("notification_content")}}},
            {"if": kind_is("live_activity"),
             "then": {"required": ["live_activity"],
                      "properties": {"live_activity": ref("live_activity")}}},
            {"if": {"required": ["kind", "live_activity"],
                    "properties": {"kind": {"const": "live_activity"},
                                   "live_activity": {"required": ["event"],
                                                     "properties": {"event": {"const": "start"}}}}},
             "then": {"required": ["audience"]}},
            {"if": kind_is("voip"),
             "then": {"required": ["voip", "audience"], "properties": {"voip": ref("voip")}}},
        ],
        "$defs": defs,
        "examples": EXAMPLES,
    }


def render():
    return json.dumps(build(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv):
    text = render()
    if argv[1:] == ["--check"]:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date: run {Path(argv[0]).name}", file=sys.stderr)
            return 1
        return 0
    if argv[1:]:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
