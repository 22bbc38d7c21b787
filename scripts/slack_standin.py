#!/usr/bin/env python3
"""A local stand-in for Slack, for `make demo` and the tests: the channel #agent-tools as Slack
would show it, incoming webhooks, and enough of the Web API for ``slack_sdk``'s WebClient
(chat.postMessage, chat.update, views.open, users.info, auth.test). Its buttons, selects and
modals send interaction requests signed like Slack's to the app's request URL, so the whole loop
(alert, press, reason modal, update in place, "only visible to you" answers) runs without a
workspace.

    python scripts/slack_standin.py --port 8001 \\
        --actions-url http://127.0.0.1:8000/slack/actions --signing-secret "$SECRET"
    # webhook: http://127.0.0.1:8001/services/demo     Web API: http://127.0.0.1:8001/api/

Standard library only. Every text is escaped; mrkdwn is rendered from Slack's own escaping.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import html
import itertools
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlsplit

__all__ = ("SlackStandIn", "StandInUser", "render_mrkdwn", "sign")

MAX_BODY_BYTES = 1_000_000
KEEP = 500
CHANNEL_ID = "C0AGENTS01"
CHANNEL_NAME = "agent-tools"
TEAM_ID = "T0BREAKERS"
CALL_TIMEOUT_SECONDS = 10.0
_COLOR = re.compile(r"^#?[0-9A-Fa-f]{6}$")


@dataclass(frozen=True)
class StandInUser:
    id: str
    name: str
    email: str = ""


DEFAULT_USERS = (
    StandInUser("U0OPERATOR", "operator", "operator@example.com"),
    StandInUser("U0VIEWER01", "viewer", "viewer@example.com"),
    StandInUser("U0STRANGER", "stranger", ""),
)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's v0 signature of a request body."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


# -- mrkdwn ---------------------------------------------------------------------------------------

_TOKEN = re.compile(r"<([^<>]*)>")
_CODE = re.compile(r"`([^`\n]+)`")
_BOLD = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])")
_STRIKE = re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])")


def _unslack(text: str) -> str:
    """Slack's three entities back to characters (it decodes no other)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def _inline(text: str) -> str:
    """Plain mrkdwn (no <…> tokens): escaped, then *bold*, _italic_, ~strike~, `code`."""
    out: list[str] = []
    last = 0
    for match in _CODE.finditer(text):
        out.append(_styles(html.escape(_unslack(text[last : match.start()]))))
        out.append(f"<code>{html.escape(_unslack(match.group(1)))}</code>")
        last = match.end()
    out.append(_styles(html.escape(_unslack(text[last:]))))
    return "".join(out)


def _styles(escaped: str) -> str:
    escaped = _BOLD.sub(r"<b>\1</b>", escaped)
    escaped = _ITALIC.sub(r"<i>\1</i>", escaped)
    return _STRIKE.sub(r"<s>\1</s>", escaped)


def _date(inner: str) -> str:
    # <!date^1700000000^{date_short_pretty} {time_secs}|fallback>: the reader's time; here UTC.
    head, _, fallback = inner.partition("|")
    parts = head.split("^")
    try:
        when = datetime.fromtimestamp(int(parts[1]), tz=UTC)
    except (IndexError, ValueError, OverflowError, OSError):
        return html.escape(_unslack(fallback or head))
    shown = when.strftime("%b %d, %H:%M:%S UTC")
    return f'<time datetime="{when.isoformat()}">{html.escape(shown)}</time>'


def _token(inner: str) -> str:
    if inner.startswith("!date^"):
        return _date(inner)
    if inner.startswith("!"):
        special = inner[1:].partition("|")[0]
        return f"<b>@{html.escape(special)}</b>"
    if inner.startswith(("@", "#")):
        label = inner.partition("|")[2] or inner[1:]
        return f"<b>{inner[0]}{html.escape(_unslack(label))}</b>"
    url, bar, label = inner.partition("|")
    target = _unslack(url)
    if urlsplit(target).scheme in ("http", "https", "mailto"):
        text = _inline(label) if bar else html.escape(target)
        return f'<a href="{html.escape(target)}" rel="noopener noreferrer">{text}</a>'
    return html.escape(f"<{inner}>")  # not a token Slack knows: shown as typed


def render_mrkdwn(text: str) -> str:
    """Slack mrkdwn as HTML: links, dates, mentions, *bold*, _italic_, ~strike~, `code`."""
    out: list[str] = []
    last = 0
    for match in _TOKEN.finditer(text):
        out.append(_inline(text[last : match.start()]))
        out.append(_token(match.group(1)))
        last = match.end()
    out.append(_inline(text[last:]))
    return "".join(out).replace("\n", "<br>")


def _text(obj: Any) -> str:
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return ""
    if obj.get("type") == "mrkdwn":
        return render_mrkdwn(obj["text"])
    return html.escape(obj["text"])


# -- state ----------------------------------------------------------------------------------------


@dataclass
class Message:
    ts: str
    payload: dict[str, Any]
    received: float
    source: str  # "bot" or "webhook"
    edits: int = 0
    # (time.monotonic(), attachment colour) of the post and of each update (benchmarks).
    history: list[tuple[float, str]] = field(default_factory=list)

    @property
    def color(self) -> str:
        attachments = self.payload.get("attachments") or [{}]
        return str(attachments[0].get("color") or "") if isinstance(attachments[0], dict) else ""


@dataclass
class OpenView:
    id: str
    view: dict[str, Any]
    user: str
    errors: dict[str, str] = field(default_factory=dict)


class SlackStandIn:
    """The stand-in's state and HTTP server; ``start()`` it in a thread or ``serve_forever()``."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        signing_secret: str = "",
        actions_url: str = "",
        bot_token: str = "",
        users: tuple[StandInUser, ...] = DEFAULT_USERS,
    ) -> None:
        self.signing_secret = signing_secret
        self.actions_url = actions_url
        self.bot_token = bot_token
        self.users = {user.id: user for user in users}
        self.messages: deque[Message] = deque(maxlen=KEEP)
        self.ephemerals: list[tuple[str, str, float]] = []  # user id, mrkdwn, when
        self.notices: deque[str] = deque(maxlen=20)
        self.views: dict[str, OpenView] = {}
        self.triggers: dict[str, tuple[str, float]] = {}  # trigger id -> user id, issued
        self.trigger_views: dict[str, str] = {}
        self.responders: dict[str, str] = {}  # response_url id -> user id
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.RLock()
        self._ids = itertools.count(1)
        self._ts = itertools.count(1)
        self.server = ThreadingHTTPServer((host, port), _handler(self))
        self.server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # lifecycle
    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api_url(self) -> str:
        return self.url + "/api/"

    def start(self) -> SlackStandIn:
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> SlackStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset(self) -> None:
        """Forget every message, answer, modal and call (between tests)."""
        with self.lock:
            self.messages.clear()
            self.ephemerals.clear()
            self.notices.clear()
            self.views.clear()
            self.triggers.clear()
            self.trigger_views.clear()
            self.responders.clear()
            self.calls.clear()

    # what tests read
    def bot_messages(self) -> list[Message]:
        with self.lock:
            return [m for m in self.messages if m.source == "bot"]

    def message(self, ts: str) -> Message | None:
        with self.lock:
            return next((m for m in self.messages if m.ts == ts), None)

    def ephemerals_for(self, user_id: str) -> list[str]:
        with self.lock:
            return [text for uid, text, _ in self.ephemerals if uid == user_id]

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids):08d}"

    # -- Web API ----------------------------------------------------------------------------------

    def api(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.calls.append((method, args))
        handler = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "views.open": self._views_open,
            "users.info": self._users_info,
        }.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "team_id": TEAM_ID, "user_id": "U0BREAKBOT", "team": "breakers"}

    def _channel_ok(self, channel: object) -> bool:
        return channel in (CHANNEL_ID, CHANNEL_NAME, "#" + CHANNEL_NAME)

    def _body_problem(self, args: dict[str, Any]) -> str | None:
        if not (args.get("text") or args.get("blocks") or args.get("attachments")):
            return "no_text"
        for key in ("blocks", "attachments"):
            if key in args and not isinstance(args[key], list):
                return f"invalid_{key}"
        return None

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self._channel_ok(args.get("channel")):
            return {"ok": False, "error": "channel_not_found"}
        problem = self._body_problem(args)
        if problem:
            return {"ok": False, "error": problem}
        with self.lock:
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            payload = {k: args[k] for k in ("text", "blocks", "attachments") if k in args}
            message = Message(ts, payload, time.time(), "bot")
            message.history.append((time.monotonic(), message.color))
            self.messages.append(message)
        return {"ok": True, "channel": CHANNEL_ID, "ts": ts, "message": {"ts": ts, **payload}}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        if not self._channel_ok(args.get("channel")):
            return {"ok": False, "error": "channel_not_found"}
        problem = self._body_problem(args)
        if problem:
            return {"ok": False, "error": problem}
        with self.lock:
            message = self.message(str(args.get("ts")))
            if message is None:
                return {"ok": False, "error": "message_not_found"}
            for key in ("text", "blocks", "attachments"):
                if key in args:
                    message.payload[key] = args[key]
            message.edits += 1
            message.received = time.time()
            message.history.append((time.monotonic(), message.color))
        return {"ok": True, "channel": CHANNEL_ID, "ts": message.ts}

    def _views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        view = args.get("view")
        if isinstance(view, str):
            try:
                view = json.loads(view)
            except ValueError:
                return {"ok": False, "error": "invalid_arguments"}
        if not isinstance(view, dict) or view.get("type") != "modal":
            return {"ok": False, "error": "invalid_arguments"}
        trigger = str(args.get("trigger_id") or "")
        with self.lock:
            issued = self.triggers.pop(trigger, None)  # a trigger works once
            if issued is None:
                return {"ok": False, "error": "invalid_trigger_id"}
            user, at = issued
            if time.time() - at > 3:
                return {"ok": False, "error": "expired_trigger_id"}
            view_id = self._next_id("V")
            self.views[view_id] = OpenView(view_id, view, user)
            self.trigger_views[trigger] = view_id
        return {"ok": True, "view": {"id": view_id, **view}}

    def _users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(args.get("user") or ""))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        profile = {"real_name": user.name, "display_name": user.name}
        if user.email:
            profile["email"] = user.email
        return {
            "ok": True,
            "user": {"id": user.id, "team_id": TEAM_ID, "name": user.name, "profile": profile},
        }

    # -- interactions (what pressing sends) --------------------------------------------------------

    def _who(self, user_id: str) -> dict[str, Any]:
        user = self.users.get(user_id) or StandInUser(user_id, user_id)
        return {"id": user.id, "username": user.name, "name": user.name, "team_id": TEAM_ID}

    def send_signed(
        self, payload: dict[str, Any], *, timestamp: int | None = None, secret: str | None = None
    ) -> tuple[int, bytes]:
        """POST ``payload`` to the app's request URL, form-encoded and signed as Slack does."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = sign(self.signing_secret if secret is None else secret, stamp, body)
        request = urllib.request.Request(
            self.actions_url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/x-www-form-urlencoded",
                "X-Slack-Request-Timestamp": stamp,
                "X-Slack-Signature": signature,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=CALL_TIMEOUT_SECONDS) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def block_action_payload(
        self, *, ts: str, action_id: str, value: str, user_id: str, option: str = ""
    ) -> dict[str, Any]:
        with self.lock:
            message = self.message(ts)
            trigger = (
                f"{next(self._ids)}.{int(time.time())}.{hashlib.sha1(ts.encode()).hexdigest()[:12]}"
            )
            self.triggers[trigger] = (user_id, time.time())
            responder = self._next_id("R")
            self.responders[responder] = user_id
        action: dict[str, Any] = {"action_id": action_id, "action_ts": f"{time.time():.6f}"}
        if option:
            action.update(type="static_select", selected_option={"value": option})
        else:
            action.update(type="button", value=value)
        return {
            "type": "block_actions",
            "user": self._who(user_id),
            "team": {"id": TEAM_ID, "domain": "breakers"},
            "api_app_id": "A0BREAKERS",
            "trigger_id": trigger,
            "response_url": f"{self.url}/respond/{responder}",
            "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL_ID},
            "channel": {"id": CHANNEL_ID, "name": CHANNEL_NAME},
            "message": {"ts": ts, **(message.payload if message else {})},
            "actions": [action],
        }

    def press(
        self, *, ts: str, action_id: str, value: str, user_id: str, option: str = ""
    ) -> tuple[int, bytes, str | None]:
        """Press a button (or pick a select option); returns the app's answer and the id of the
        modal it opened, if any."""
        payload = self.block_action_payload(
            ts=ts, action_id=action_id, value=value, user_id=user_id, option=option
        )
        status, body = self.send_signed(payload)
        with self.lock:
            view_id = self.trigger_views.pop(payload["trigger_id"], None)
            self.triggers.pop(payload["trigger_id"], None)
        if status != 200:
            self.notices.append(f"The app answered {status}: {body[:200].decode(errors='replace')}")
        return status, body, view_id

    def view_submission_payload(self, view_id: str, values: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            open_view = self.views[view_id]
        view = dict(open_view.view)
        state = {
            block_id: {block_id: {"type": "plain_text_input", "value": text}}
            for block_id, text in values.items()
        }
        for block in view.get("blocks") or []:
            if block.get("type") == "input" and block.get("block_id") in values:
                action_id = (block.get("element") or {}).get("action_id", block["block_id"])
                state[block["block_id"]] = {
                    action_id: {"type": "plain_text_input", "value": values[block["block_id"]]}
                }
        view.update(id=view_id, state={"values": state}, team_id=TEAM_ID)
        return {
            "type": "view_submission",
            "user": self._who(open_view.user),
            "team": {"id": TEAM_ID, "domain": "breakers"},
            "api_app_id": "A0BREAKERS",
            "view": view,
        }

    def submit(self, view_id: str, values: dict[str, str]) -> tuple[int, dict[str, Any] | None]:
        """Submit an open modal with ``{block_id: text}``; the app's JSON answer, if any."""
        payload = self.view_submission_payload(view_id, values)
        with self.lock:
            open_view = self.views[view_id]
        status, body = self.send_signed(payload)
        answer: dict[str, Any] | None = None
        if body.strip():
            try:
                answer = json.loads(body)
            except ValueError:
                answer = None
        with self.lock:
            if status == 200 and not (answer or {}).get("response_action"):
                self.views.pop(view_id, None)
            elif isinstance(answer, dict) and answer.get("response_action") == "errors":
                open_view.errors = {str(k): str(v) for k, v in (answer.get("errors") or {}).items()}
            else:
                open_view.errors = {"": f"The app answered {status}"}
        return status, answer

    def respond(self, responder: str, payload: dict[str, Any]) -> bool:
        with self.lock:
            user = self.responders.get(responder)
            if user is None:
                return False
            self.ephemerals.append((user, str(payload.get("text") or ""), time.time()))
        return True

    def webhook(self, payload: dict[str, Any]) -> None:
        with self.lock:
            ts = f"{int(time.time())}.{next(self._ts):06d}"
            self.messages.append(Message(ts, payload, time.time(), "webhook"))

    # -- pages ------------------------------------------------------------------------------------

    def channel_page(self, acting: str) -> bytes:
        with self.lock:
            items = list(self.messages)
            ephemerals = [(t, w) for uid, t, w in self.ephemerals if uid == acting][-5:]
            notices = list(self.notices)[-3:]
        acting_user = self.users.get(acting)
        options = "".join(
            f'<option value="{html.escape(u.id)}"{" selected" if u.id == acting else ""}>'
            f"@{html.escape(u.name)}</option>"
            for u in self.users.values()
        )
        rows = "\n".join(self._message_html(m, acting) for m in items)
        rows = (
            rows or '<p class="empty">No message yet: alerts appear here when a breaker opens.</p>'
        )
        only_you = "".join(
            f'<aside class="ephemeral"><small>Only visible to you · {_clock(w)}</small>'
            f"<div>{render_mrkdwn(t)}</div></aside>"
            for t, w in ephemerals
        )
        notes = "".join(f'<p class="notice">{html.escape(n)}</p>' for n in notices)
        who = f"@{html.escape(acting_user.name)}" if acting_user else html.escape(acting)
        body = f"""<header><h1># {CHANNEL_NAME}</h1>
<form method="get" action="/" class="acting">
<label>Acting as <select name="as">{options}</select></label>
<button type="submit">Switch</button></form></header>
<p class="muted">What Breaker Panel posts, as Slack shows it (oldest first, refreshed every 3 s).
Buttons here send signed requests like Slack's, as {who}.</p>
{notes}<main>{rows}</main>{only_you}"""
        return _page(f"#{CHANNEL_NAME} ({len(items)})", body, refresh=True)

    def _message_html(self, message: Message, acting: str) -> str:
        payload = message.payload
        parts = [self._blocks_html(payload.get("blocks") or [], message, acting)]
        for attachment in payload.get("attachments") or []:
            if not isinstance(attachment, dict):
                continue
            color = str(attachment.get("color") or "")
            color = ("#" + color.lstrip("#")) if _COLOR.match(color) else "#dddddd"
            inner = self._blocks_html(attachment.get("blocks") or [], message, acting)
            if not inner and isinstance(attachment.get("text"), str):
                inner = f"<p>{render_mrkdwn(attachment['text'])}</p>"
            parts.append(
                f'<div class="attachment" data-color="{color}" style="border-left-color:{color}">'
                f"{inner}</div>"
            )
        content = "".join(parts).strip()
        if not content:
            content = f"<p>{render_mrkdwn(str(payload.get('text') or '(empty)'))}</p>"
        edited = ' <small class="muted">(edited)</small>' if message.edits else ""
        return (
            f'<article class="message" data-ts="{html.escape(message.ts)}">'
            f'<div class="meta"><b>Breaker Panel</b> <span class="app">APP</span> '
            f"<time>{_clock(message.received)}</time>{edited}</div>{content}</article>"
        )

    def _blocks_html(self, blocks: list[Any], message: Message, acting: str) -> str:
        out: list[str] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "header":
                out.append(f"<h2>{_text(block.get('text'))}</h2>")
            elif kind == "section":
                if block.get("text"):
                    out.append(f'<div class="section">{_text(block["text"])}</div>')
                fields = "".join(f"<div>{_text(f)}</div>" for f in block.get("fields") or [])
                if fields:
                    out.append(f'<div class="fields">{fields}</div>')
            elif kind == "context":
                items = " ".join(_text(e) for e in block.get("elements") or [])
                out.append(f'<div class="context">{items}</div>')
            elif kind == "divider":
                out.append("<hr>")
            elif kind == "actions":
                out.append(self._actions_html(block, message, acting))
        return "".join(out)

    def _actions_html(self, block: dict[str, Any], message: Message, acting: str) -> str:
        out: list[str] = []
        for element in block.get("elements") or []:
            if not isinstance(element, dict):
                continue
            action_id = html.escape(str(element.get("action_id") or ""))
            hidden = (
                f'<input type="hidden" name="ts" value="{html.escape(message.ts)}">'
                f'<input type="hidden" name="as" value="{html.escape(acting)}">'
                f'<input type="hidden" name="action_id" value="{action_id}">'
            )
            if element.get("type") == "button":
                label = _text(element.get("text"))
                style = str(element.get("style") or "")
                css = f"btn {style}" if style in ("primary", "danger") else "btn"
                url = str(element.get("url") or "")
                if url and urlsplit(url).scheme in ("http", "https"):
                    out.append(
                        f'<a class="{css}" href="{html.escape(url)}" target="_blank" '
                        f'rel="noopener noreferrer">{label}</a>'
                    )
                    continue
                value = html.escape(str(element.get("value") or ""))
                out.append(
                    f'<form method="post" action="/press">{hidden}'
                    f'<input type="hidden" name="value" value="{value}">'
                    f'<button class="{css}" type="submit">{label}</button></form>'
                )
            elif element.get("type") == "static_select":
                options = "".join(
                    f'<option value="{html.escape(str(o.get("value")))}">'
                    f"{_text(o.get('text'))}</option>"
                    for o in element.get("options") or []
                    if isinstance(o, dict)
                )
                placeholder = _text(element.get("placeholder")) or "Choose…"
                out.append(
                    f'<form method="post" action="/press" class="select">{hidden}'
                    f'<select name="option" aria-label="{placeholder}">{options}</select>'
                    f'<button class="btn" type="submit">{placeholder.rstrip("…")}</button></form>'
                )
        return f'<div class="actions">{"".join(out)}</div>'

    def modal_page(self, view_id: str, acting: str) -> bytes:
        with self.lock:
            open_view = self.views.get(view_id)
        if open_view is None:
            return _page(
                "Closed", '<p>This dialog is closed. <a href="/">Back to the channel</a></p>'
            )
        view = open_view.view
        blocks: list[str] = []
        for block in view.get("blocks") or []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "input":
                block_id = html.escape(str(block.get("block_id") or ""))
                element = block.get("element") or {}
                limit = int(element.get("max_length") or 3000)
                error = open_view.errors.get(str(block.get("block_id")), "")
                hint = _text(block.get("hint"))
                blocks.append(
                    f'<label for="f-{block_id}"><b>{_text(block.get("label"))}</b></label>'
                    f'<textarea id="f-{block_id}" name="{block_id}" rows="3" '
                    f'maxlength="{limit}"></textarea>'
                    + (f'<p class="error" role="alert">{html.escape(error)}</p>' if error else "")
                    + (f'<p class="muted">{hint}</p>' if hint else "")
                )
            else:
                blocks.append(self._blocks_html([block], Message("", {}, 0, "view"), acting))
        general = open_view.errors.get("", "")
        title = _text(view.get("title"))
        submit = _text(view.get("submit")) or "Submit"
        body = f"""<div class="modal" role="dialog" aria-labelledby="modal-title">
<h1 id="modal-title">{title}</h1>
<form method="post" action="/modal/{html.escape(view_id)}">
<input type="hidden" name="as" value="{html.escape(acting)}">
{"".join(blocks)}
{f'<p class="error" role="alert">{html.escape(general)}</p>' if general else ""}
<div class="actions">
<a class="btn" href="/?as={quote(acting)}">{_text(view.get("close")) or "Cancel"}</a>
<button class="btn primary" type="submit">{submit}</button></div></form></div>"""
        return _page(f"{title} — #{CHANNEL_NAME}", body)


def _clock(when: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(when)) + " UTC"


def _page(title: str, body: str, *, refresh: bool = False) -> bytes:
    meta = '<meta http-equiv="refresh" content="3">' if refresh else ""
    return f"""<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">{meta}
<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>{body}</body></html>""".encode()


_CSS = """body{font:15px/1.46 system-ui,-apple-system,sans-serif;max-width:46rem;margin:0 auto;
padding:.75rem;color:#1d1c1d}h1{font-size:1.2rem;margin:.2rem 0}header{display:flex;flex-wrap:wrap;
gap:.5rem;align-items:center;justify-content:space-between;border-bottom:1px solid #ddd}
.muted,.context{color:#616061;font-size:13px}.message{padding:.6rem 0;border-bottom:1px solid #eee}
.meta .app{background:#eee;border-radius:3px;font-size:10px;padding:0 .25rem}
.attachment{border-left:4px solid #ddd;padding:.1rem .75rem;margin:.35rem 0}
h2{font-size:1.05rem;margin:.3rem 0}.section{margin:.3rem 0;overflow-wrap:anywhere}
.fields{display:grid;grid-template-columns:repeat(auto-fit,minmax(11rem,1fr));gap:.3rem 1rem;
margin:.4rem 0;overflow-wrap:anywhere}code{background:#f6f6f6;border:1px solid #e5e5e5;
border-radius:3px;padding:0 .2rem;font-size:13px}.actions{display:flex;flex-wrap:wrap;gap:.4rem;
margin:.5rem 0}.actions form{margin:0;display:flex;gap:.25rem}.btn{font:inherit;font-weight:600;
font-size:14px;padding:.3rem .75rem;border:1px solid #bbb;border-radius:4px;background:#fff;
color:#1d1c1d;text-decoration:none;cursor:pointer;min-height:2.2rem;display:inline-flex;
align-items:center}.btn.primary{background:#007a5a;
border-color:#007a5a;color:#fff}.btn.danger{background:#e01e5a;border-color:#e01e5a;color:#fff}
select{font:inherit;min-height:2.2rem}.ephemeral{background:#f8f8f8;border:1px solid #ddd;
border-radius:6px;padding:.5rem .75rem;margin:.75rem 0}.notice{color:#a00}.error{color:#c00}
.modal{border:1px solid #ccc;border-radius:8px;padding:1rem;margin-top:1rem}
textarea{width:100%;box-sizing:border-box;font:inherit}a{color:#1264a3}"""


def _handler(standin: SlackStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "slack-standin"

        def _body(self) -> bytes | None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY_BYTES:
                self._reply(413, b"request_too_large")
                return None
            return self.rfile.read(length)

        def _acting(self, query: dict[str, list[str]]) -> str:
            wanted = (query.get("as") or [""])[0]
            return wanted if wanted in standin.users else next(iter(standin.users), "")

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            if parts.path == "/messages.json":
                with standin.lock:
                    data = json.dumps([m.payload for m in standin.messages]).encode()
                return self._reply(200, data, "application/json")
            if parts.path.startswith("/modal/"):
                page = standin.modal_page(parts.path.removeprefix("/modal/"), self._acting(query))
                return self._reply(200, page, "text/html; charset=utf-8")
            if parts.path.startswith("/api/"):
                return self._api(
                    parts.path.removeprefix("/api/"), {k: v[0] for k, v in query.items()}
                )
            if parts.path != "/":
                return self._reply(404, b"not_found")
            self._reply(200, standin.channel_page(self._acting(query)), "text/html; charset=utf-8")

        def do_POST(self) -> None:
            parts = urlsplit(self.path)
            body = self._body()
            if body is None:
                return
            if parts.path.startswith("/api/"):
                return self._api_post(parts.path.removeprefix("/api/"), body)
            if parts.path.startswith("/respond/"):
                payload = _json(body)
                if payload is None:
                    return self._reply(400, b"invalid_payload")
                ok = standin.respond(parts.path.removeprefix("/respond/"), payload)
                return self._reply(200 if ok else 404, b"ok" if ok else b"no_such_response_url")
            if parts.path == "/press":
                return self._press(parse_qs(body.decode(errors="replace")))
            if parts.path.startswith("/modal/"):
                return self._submit(parts.path.removeprefix("/modal/"), body)
            # Anything else is an incoming webhook, as before.
            payload = _json(body)
            if payload is None:
                return self._reply(400, b"invalid_payload")
            if not (payload.get("text") or payload.get("blocks") or payload.get("attachments")):
                return self._reply(400, b"no_text")
            standin.webhook(payload)
            self._reply(200, b"ok")

        def _api_post(self, method: str, body: bytes) -> None:
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            if kind == "application/json":
                args = _json(body)
                if args is None:
                    return self._reply(
                        200, b'{"ok":false,"error":"invalid_json"}', "application/json"
                    )
            else:
                args = {k: v[0] for k, v in parse_qs(body.decode(errors="replace")).items()}
                for key in ("blocks", "attachments", "view"):
                    if isinstance(args.get(key), str):
                        args[key] = _json(args[key].encode()) or args[key]
            self._api(method, args)

        def _api(self, method: str, args: dict[str, Any]) -> None:
            auth = self.headers.get("Authorization") or ""
            token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
            if not token or (standin.bot_token and token != standin.bot_token):
                answer: dict[str, Any] = {"ok": False, "error": "invalid_auth"}
            else:
                answer = standin.api(method, args)
            self._reply(200, json.dumps(answer).encode(), "application/json; charset=utf-8")

        def _press(self, form: dict[str, list[str]]) -> None:
            def one(name: str) -> str:
                return (form.get(name) or [""])[0]

            acting = self._acting(form)
            _, _, view_id = standin.press(
                ts=one("ts"),
                action_id=one("action_id"),
                value=one("value"),
                user_id=acting,
                option=one("option"),
            )
            where = f"/modal/{view_id}?as={quote(acting)}" if view_id else f"/?as={quote(acting)}"
            self._redirect(where)

        def _submit(self, view_id: str, body: bytes) -> None:
            form = parse_qs(body.decode(errors="replace"), keep_blank_values=True)
            acting = self._acting(form)
            if view_id not in standin.views:
                return self._redirect(f"/?as={quote(acting)}")
            values = {k: v[0] for k, v in form.items() if k != "as"}
            standin.submit(view_id, values)
            if view_id in standin.views:  # the app refused it: show its errors
                return self._redirect(f"/modal/{view_id}?as={quote(acting)}")
            self._redirect(f"/?as={quote(acting)}")

        def _redirect(self, where: str) -> None:
            self.send_response(303)
            self.send_header("Location", where)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header(
                "Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'",
            )
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def _json(body: bytes) -> dict[str, Any] | None:
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return None
    return payload if isinstance(payload, dict) else None


def _iter_users(specs: list[str]) -> Iterator[StandInUser]:
    for spec in specs:
        user_id, _, rest = spec.partition(":")
        name, _, email = rest.partition(":")
        yield StandInUser(user_id, name or user_id, email)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--actions-url", default="", help="the app's interactivity request URL")
    parser.add_argument("--signing-secret", default="", help="signs the interaction requests")
    parser.add_argument("--bot-token", default="", help="the only token the Web API accepts")
    parser.add_argument(
        "--user", action="append", default=[], help="ID:name:email (repeat); default three users"
    )
    args = parser.parse_args()
    users = tuple(_iter_users(args.user)) or DEFAULT_USERS
    standin = SlackStandIn(
        host=args.host,
        port=args.port,
        signing_secret=args.signing_secret,
        actions_url=args.actions_url,
        bot_token=args.bot_token,
        users=users,
    )
    print(
        f"Slack stand-in (#{CHANNEL_NAME}) on {standin.url}/  Web API {standin.api_url}", flush=True
    )
    standin.server.serve_forever()


if __name__ == "__main__":
    main()
