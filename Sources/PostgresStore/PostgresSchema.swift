import StoreModel

/// The PostgreSQL schema: the same tables and columns as the SQLite backend's newest migration, so
/// that an export (docs/export-format.md) moves between the two backends unchanged.
enum PostgresSchema {
    /// The schema an export names: the SQLite backend's newest migration, whose tables these are
    /// (its indexes may differ: an export carries rows, not indexes).
    static let name = StoreSchema.newest

    /// One migration: DDL statements (split at each `;` that ends a line), or one statement as is
    /// (a function body has `;`s of its own).
    enum Migration {
        case script(String)
        case statement(String)
    }

    /// This backend's own migrations, applied in order at start under an advisory lock (nodes that
    /// start together apply each once). Only append.
    static let migrations: [Migration] = [.script(
        """
        CREATE TABLE sender (
          sender_id TEXT PRIMARY KEY NOT NULL,
          server_key TEXT NOT NULL,
          created_at BIGINT NOT NULL
        );
        CREATE SEQUENCE device_key_seq;
        CREATE TABLE device (
          token TEXT PRIMARY KEY NOT NULL,
          device_id TEXT NOT NULL UNIQUE,
          secret TEXT NOT NULL,
          app TEXT NOT NULL,
          platform TEXT NOT NULL,
          senders TEXT NOT NULL,
          created_at BIGINT NOT NULL,
          status TEXT NOT NULL,
          state TEXT NOT NULL,
          replaced_by TEXT,
          apns_token TEXT,
          web_subscription TEXT,
          device_key BIGINT NOT NULL UNIQUE DEFAULT nextval('device_key_seq')
        );
        CREATE INDEX device_by_apns_token ON device(apns_token) WHERE apns_token IS NOT NULL;
        CREATE TABLE queued_message (
          seq BIGSERIAL PRIMARY KEY,
          device_key BIGINT NOT NULL,
          device_message_id TEXT NOT NULL,
          sender_id TEXT NOT NULL,
          app_message_id TEXT NOT NULL,
          collapse_key TEXT,
          priority TEXT NOT NULL,
          ttl BIGINT NOT NULL,
          enqueued_at BIGINT NOT NULL,
          expires_at BIGINT NOT NULL,
          receipt BIGINT NOT NULL,
          delay_while_idle BIGINT NOT NULL,
          notification BIGINT NOT NULL,
          kind TEXT NOT NULL,
          payload TEXT NOT NULL,
          platform_blocks TEXT,
          body_id BIGINT
        );
        CREATE UNIQUE INDEX queued_message_by_device ON queued_message(device_key, device_message_id);
        CREATE INDEX queued_message_by_collapse_key ON queued_message(device_key, collapse_key);
        CREATE INDEX queued_message_by_expiry ON queued_message(expires_at);
        CREATE INDEX queued_message_by_body ON queued_message(body_id) WHERE body_id IS NOT NULL;
        CREATE TABLE outbound (
          seq BIGSERIAL PRIMARY KEY,
          sender_id TEXT NOT NULL,
          kind TEXT NOT NULL,
          message_id TEXT NOT NULL,
          token TEXT NOT NULL,
          json TEXT NOT NULL,
          created_at BIGINT NOT NULL,
          expires_at BIGINT NOT NULL,
          about_message_id TEXT
        );
        CREATE UNIQUE INDEX outbound_by_id ON outbound(sender_id, kind, token, message_id);
        CREATE TABLE tray (
          token TEXT NOT NULL,
          device_message_id TEXT NOT NULL,
          payload TEXT NOT NULL,
          shown_at BIGINT NOT NULL,
          view TEXT,
          seq BIGSERIAL NOT NULL,
          PRIMARY KEY (token, device_message_id)
        );
        CREATE TABLE meta (
          key TEXT PRIMARY KEY NOT NULL,
          value TEXT NOT NULL
        );
        CREATE TABLE topic_subscription (
          sender_id TEXT NOT NULL,
          topic TEXT NOT NULL,
          device_key BIGINT NOT NULL,
          added_at BIGINT NOT NULL,
          PRIMARY KEY (sender_id, topic, device_key)
        );
        CREATE INDEX topic_subscription_by_device ON topic_subscription(device_key);
        CREATE TABLE message_body (
          id BIGSERIAL PRIMARY KEY,
          payload TEXT NOT NULL,
          platform_blocks TEXT,
          expires_at BIGINT NOT NULL
        );
        CREATE TABLE device_group (
          id TEXT PRIMARY KEY NOT NULL,
          sender_id TEXT NOT NULL,
          name TEXT NOT NULL,
          members TEXT NOT NULL,
          created_at BIGINT NOT NULL
        );
        CREATE UNIQUE INDEX device_group_by_name ON device_group(sender_id, name);
        CREATE TABLE apns_feedback (
          bundle_id TEXT NOT NULL,
          device_token TEXT NOT NULL,
          timestamp BIGINT NOT NULL,
          PRIMARY KEY (bundle_id, device_token)
        );
        """),
        // Several nodes on one database (docs/scaling.md): each node's lease, which node holds each
        // connected device, and which node holds each upstream message or receipt (`owner`: NULL or
        // a node whose lease ran out means no node does, and any node with the sender may take it).
        // Times come from PostgreSQL's clock (`ccs_now_ms`), never a node's: nodes' clocks may differ.
        .script("""
        CREATE FUNCTION ccs_now_ms() RETURNS BIGINT AS 'SELECT (extract(epoch from clock_timestamp()) * 1000)::BIGINT'
          LANGUAGE SQL VOLATILE;
        CREATE TABLE cluster_node (
          id TEXT PRIMARY KEY NOT NULL,
          started_at BIGINT NOT NULL,
          lease_until BIGINT NOT NULL
        );
        CREATE TABLE device_presence (
          token TEXT PRIMARY KEY NOT NULL,
          node TEXT NOT NULL,
          since BIGINT NOT NULL
        );
        CREATE INDEX device_presence_by_node ON device_presence(node);
        ALTER TABLE outbound ADD COLUMN owner TEXT;
        CREATE INDEX outbound_by_sender ON outbound(sender_id);
        """),
        // Who writes a device's queue takes turns, on any node: an enqueue (and a device's presence)
        // takes the device's advisory lock and, shared, lock 0; a fan-out takes lock 0 alone, so it
        // waits for the enqueues in progress and they for it. Advisory locks live in memory: a row
        // lock (SELECT … FOR UPDATE) would write the device's row, and the WAL, on every message.
        .statement("""
        CREATE FUNCTION ccs_lock_device(dk BIGINT) RETURNS VOID LANGUAGE plpgsql AS $body$
        BEGIN
          PERFORM pg_advisory_xact_lock_shared(0);
          PERFORM pg_advisory_xact_lock(dk);
        END
        $body$
        """),
        // One message stored for one device under FCM's rules, in one statement: the device locked
        // (every writer of its queue takes its turn, on any node), collapse, the non-collapsible limit
        // with its notice, the collapse-key limit, and the node holding the device told. All inline:
        // PL/pgSQL keeps its plans, while a SQL-language helper was parsed and planned on every call. Returns what the rules removed
        // (for the journal). The same rules as the SQLite backend's `Store.enqueue`.
        .statement("""
        CREATE FUNCTION ccs_enqueue(me TEXT, token_ TEXT,
          m_id TEXT, m_sender TEXT, m_app_id TEXT, m_key TEXT, m_priority TEXT, m_ttl BIGINT, m_enqueued BIGINT,
          m_expires BIGINT, m_receipt BIGINT, m_dwi BIGINT, m_notification BIGINT, m_kind TEXT, m_payload TEXT, m_blocks TEXT,
          limited BOOLEAN, max_keys BIGINT, max_plain BIGINT,
          n_id TEXT, n_sender TEXT, n_app_id TEXT, n_key TEXT, n_priority TEXT, n_ttl BIGINT, n_enqueued BIGINT,
          n_expires BIGINT, n_receipt BIGINT, n_dwi BIGINT, n_notification BIGINT, n_kind TEXT, n_payload TEXT, n_blocks TEXT)
        RETURNS TABLE(r_id TEXT, r_kind TEXT, r_sender TEXT, r_reason TEXT, r_on_arrival BOOLEAN)
        LANGUAGE plpgsql AS $body$
        DECLARE
          dk BIGINT;
          stored BIGINT;
        BEGIN
          SELECT d.device_key INTO dk FROM device d WHERE d.token = token_;
          IF NOT FOUND THEN
            RAISE EXCEPTION 'no device with token %', token_ USING ERRCODE = 'P0002';
          END IF;
          -- ccs_lock_device, inline: a call would cost a function lookup per message.
          PERFORM pg_advisory_xact_lock_shared(0);
          PERFORM pg_advisory_xact_lock(dk);
          IF m_key IS NOT NULL THEN
            RETURN QUERY WITH gone AS (
                DELETE FROM queued_message q WHERE q.device_key = dk AND q.collapse_key = m_key AND q.kind IN ('message', 'apns')
                RETURNING q.device_message_id, q.kind, q.sender_id)
              SELECT g.device_message_id, g.kind, g.sender_id, 'collapsed'::TEXT, false FROM gone g;
          END IF;
          IF limited AND m_key IS NULL THEN
            SELECT COUNT(*) INTO stored FROM queued_message q
              WHERE q.device_key = dk AND q.collapse_key IS NULL AND q.kind = 'message';
            IF stored >= max_plain THEN
              -- The new message goes with the stored ones; the device gets the notice instead (once).
              r_id := m_id; r_kind := m_kind; r_sender := m_sender; r_reason := 'discarded'; r_on_arrival := true;
              RETURN NEXT;
              RETURN QUERY WITH gone AS (
                  DELETE FROM queued_message q WHERE q.device_key = dk AND q.collapse_key IS NULL AND q.kind = 'message'
                  RETURNING q.device_message_id, q.kind, q.sender_id)
                SELECT g.device_message_id, g.kind, g.sender_id, 'discarded'::TEXT, false FROM gone g;
              IF NOT EXISTS (SELECT 1 FROM queued_message q WHERE q.device_key = dk AND q.kind = 'deleted_messages') THEN
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
                    enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
                  VALUES (dk, n_id, n_sender, n_app_id, n_key, n_priority, n_ttl, n_enqueued, n_expires, n_receipt, n_dwi,
                    n_notification, n_kind, n_payload, n_blocks)
                  ON CONFLICT(device_key, device_message_id) DO UPDATE SET sender_id = EXCLUDED.sender_id,
                    app_message_id = EXCLUDED.app_message_id, collapse_key = EXCLUDED.collapse_key, priority = EXCLUDED.priority,
                    ttl = EXCLUDED.ttl, enqueued_at = EXCLUDED.enqueued_at, expires_at = EXCLUDED.expires_at,
                    receipt = EXCLUDED.receipt, delay_while_idle = EXCLUDED.delay_while_idle,
                    notification = EXCLUDED.notification, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
                    platform_blocks = EXCLUDED.platform_blocks, body_id = NULL, seq = nextval('queued_message_seq_seq');
              END IF;
              -- The device's node reads its queue (the notice).
              PERFORM pg_notify('ccs_node_' || p.node, token_) FROM device_presence p JOIN cluster_node c ON c.id = p.node
                WHERE p.token = token_ AND p.node <> me AND c.lease_until > ccs_now_ms();
              RETURN;
            END IF;
          END IF;
          INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
              enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
            VALUES (dk, m_id, m_sender, m_app_id, m_key, m_priority, m_ttl, m_enqueued, m_expires, m_receipt, m_dwi,
              m_notification, m_kind, m_payload, m_blocks)
            ON CONFLICT(device_key, device_message_id) DO UPDATE SET sender_id = EXCLUDED.sender_id,
              app_message_id = EXCLUDED.app_message_id, collapse_key = EXCLUDED.collapse_key, priority = EXCLUDED.priority,
              ttl = EXCLUDED.ttl, enqueued_at = EXCLUDED.enqueued_at, expires_at = EXCLUDED.expires_at,
              receipt = EXCLUDED.receipt, delay_while_idle = EXCLUDED.delay_while_idle,
              notification = EXCLUDED.notification, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
              platform_blocks = EXCLUDED.platform_blocks, body_id = NULL, seq = nextval('queued_message_seq_seq');
          -- The device's node gets the message itself when it fits a notification (8000 bytes), so that
          -- it hands it over without reading the queue; else the token, and it reads the queue.
          PERFORM pg_notify('ccs_node_' || p.node, CASE WHEN octet_length(j) <= 7900 THEN j ELSE token_ END)
          FROM device_presence p JOIN cluster_node c ON c.id = p.node,
            LATERAL (SELECT json_build_object('token', token_, 'id', m_id, 'sender', m_sender, 'app_id', m_app_id,
              'key', m_key, 'priority', m_priority, 'ttl', m_ttl, 'enqueued', m_enqueued, 'expires', m_expires,
              'receipt', m_receipt, 'dwi', m_dwi, 'notification', m_notification, 'kind', m_kind, 'payload', m_payload,
              'blocks', m_blocks)::TEXT AS j) message
          WHERE p.token = token_ AND p.node <> me AND c.lease_until > ccs_now_ms();
          IF limited AND m_key IS NOT NULL THEN
            -- At most max_keys collapse keys: the oldest keys' messages go.
            RETURN QUERY WITH keys AS (
                SELECT q.collapse_key AS k, MIN(q.seq) AS first FROM queued_message q
                WHERE q.device_key = dk AND q.collapse_key IS NOT NULL AND q.kind IN ('message', 'apns')
                GROUP BY q.collapse_key),
              doomed AS (SELECT k FROM keys ORDER BY first DESC OFFSET max_keys),
              gone AS (
                DELETE FROM queued_message q WHERE q.device_key = dk AND q.kind IN ('message', 'apns')
                  AND q.collapse_key IN (SELECT k FROM doomed)
                RETURNING q.device_message_id, q.kind, q.sender_id)
              SELECT g.device_message_id, g.kind, g.sender_id, 'collapsed'::TEXT, false FROM gone g;
          END IF;
        END
        $body$
        """),
        // A run of enqueues of one batch as one statement (one round trip): `batch` is a JSON array of
        // messages with their limits; the removals come back numbered by the message they belong to.
        .statement("""
        CREATE FUNCTION ccs_enqueue_many(me TEXT, batch JSONB)
        RETURNS TABLE(r_index INT, r_id TEXT, r_kind TEXT, r_sender TEXT, r_reason TEXT, r_on_arrival BOOLEAN)
        LANGUAGE plpgsql AS $body$
        DECLARE
          e JSONB;
          n JSONB;
          i INT := 0;
        BEGIN
          FOR e IN SELECT value FROM jsonb_array_elements(batch) LOOP
            n := e->'notice';
            RETURN QUERY SELECT i, x.r_id, x.r_kind, x.r_sender, x.r_reason, x.r_on_arrival FROM ccs_enqueue(me, e->>'token',
              e->>'id', e->>'sender', e->>'app_id', e->>'key', e->>'priority', (e->>'ttl')::BIGINT, (e->>'enqueued')::BIGINT,
              (e->>'expires')::BIGINT, (e->>'receipt')::BIGINT, (e->>'dwi')::BIGINT, (e->>'notification')::BIGINT,
              e->>'kind', e->>'payload', e->>'blocks', (e->>'limited')::BOOLEAN, (e->>'max_keys')::BIGINT,
              (e->>'max_plain')::BIGINT,
              n->>'id', n->>'sender', n->>'app_id', n->>'key', n->>'priority', (n->>'ttl')::BIGINT, (n->>'enqueued')::BIGINT,
              (n->>'expires')::BIGINT, (n->>'receipt')::BIGINT, (n->>'dwi')::BIGINT, (n->>'notification')::BIGINT,
              n->>'kind', n->>'payload', n->>'blocks') x;
            i := i + 1;
          END LOOP;
        END
        $body$
        """),
        // Where each node's link listens and the secret it expects (NodeLinks): the nodes' offers and
        // confirmations go over those links instead of through PostgreSQL's notifications.
        .script("""
        ALTER TABLE cluster_node ADD COLUMN link_host TEXT;
        ALTER TABLE cluster_node ADD COLUMN link_port BIGINT;
        ALTER TABLE cluster_node ADD COLUMN link_secret TEXT;
        """),
        // An installation's later tokens (Store's migration v11).
        .script("ALTER TABLE device ADD COLUMN refreshed_tokens TEXT;"),
        // Issue 39. Each live node's slot of device message ids (`MessageIDSlot`); the key that what
        // nodes send through NOTIFY is sealed with (`NotifySeal`), in a table no other role may read; and
        // `ccs_enqueue` again: a second message under a taken id fails instead of replacing the first,
        // and the device's node is told the token only (docs/scaling.md).
        .script("""
        ALTER TABLE cluster_node ADD COLUMN id_slot BIGINT;
        CREATE TABLE cluster_key (
          id INT PRIMARY KEY NOT NULL,
          secret TEXT NOT NULL
        );
        REVOKE ALL ON cluster_key FROM PUBLIC;
        REVOKE ALL ON cluster_node FROM PUBLIC;
        """),
        .statement("""
        CREATE OR REPLACE FUNCTION ccs_enqueue(me TEXT, token_ TEXT,
          m_id TEXT, m_sender TEXT, m_app_id TEXT, m_key TEXT, m_priority TEXT, m_ttl BIGINT, m_enqueued BIGINT,
          m_expires BIGINT, m_receipt BIGINT, m_dwi BIGINT, m_notification BIGINT, m_kind TEXT, m_payload TEXT, m_blocks TEXT,
          limited BOOLEAN, max_keys BIGINT, max_plain BIGINT,
          n_id TEXT, n_sender TEXT, n_app_id TEXT, n_key TEXT, n_priority TEXT, n_ttl BIGINT, n_enqueued BIGINT,
          n_expires BIGINT, n_receipt BIGINT, n_dwi BIGINT, n_notification BIGINT, n_kind TEXT, n_payload TEXT, n_blocks TEXT)
        RETURNS TABLE(r_id TEXT, r_kind TEXT, r_sender TEXT, r_reason TEXT, r_on_arrival BOOLEAN)
        LANGUAGE plpgsql AS $body$
        DECLARE
          dk BIGINT;
          stored BIGINT;
        BEGIN
          SELECT d.device_key INTO dk FROM device d WHERE d.token = token_;
          IF NOT FOUND THEN
            RAISE EXCEPTION 'no device with token %', token_ USING ERRCODE = 'P0002';
          END IF;
          -- ccs_lock_device, inline: a call would cost a function lookup per message.
          PERFORM pg_advisory_xact_lock_shared(0);
          PERFORM pg_advisory_xact_lock(dk);
          IF m_key IS NOT NULL THEN
            RETURN QUERY WITH gone AS (
                DELETE FROM queued_message q WHERE q.device_key = dk AND q.collapse_key = m_key AND q.kind IN ('message', 'apns')
                RETURNING q.device_message_id, q.kind, q.sender_id)
              SELECT g.device_message_id, g.kind, g.sender_id, 'collapsed'::TEXT, false FROM gone g;
          END IF;
          IF limited AND m_key IS NULL THEN
            SELECT COUNT(*) INTO stored FROM queued_message q
              WHERE q.device_key = dk AND q.collapse_key IS NULL AND q.kind = 'message';
            IF stored >= max_plain THEN
              -- The new message goes with the stored ones; the device gets the notice instead (once).
              r_id := m_id; r_kind := m_kind; r_sender := m_sender; r_reason := 'discarded'; r_on_arrival := true;
              RETURN NEXT;
              RETURN QUERY WITH gone AS (
                  DELETE FROM queued_message q WHERE q.device_key = dk AND q.collapse_key IS NULL AND q.kind = 'message'
                  RETURNING q.device_message_id, q.kind, q.sender_id)
                SELECT g.device_message_id, g.kind, g.sender_id, 'discarded'::TEXT, false FROM gone g;
              IF NOT EXISTS (SELECT 1 FROM queued_message q WHERE q.device_key = dk AND q.kind = 'deleted_messages') THEN
                INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
                    enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
                  VALUES (dk, n_id, n_sender, n_app_id, n_key, n_priority, n_ttl, n_enqueued, n_expires, n_receipt, n_dwi,
                    n_notification, n_kind, n_payload, n_blocks)
                  ON CONFLICT(device_key, device_message_id) DO UPDATE SET sender_id = EXCLUDED.sender_id,
                    app_message_id = EXCLUDED.app_message_id, collapse_key = EXCLUDED.collapse_key, priority = EXCLUDED.priority,
                    ttl = EXCLUDED.ttl, enqueued_at = EXCLUDED.enqueued_at, expires_at = EXCLUDED.expires_at,
                    receipt = EXCLUDED.receipt, delay_while_idle = EXCLUDED.delay_while_idle,
                    notification = EXCLUDED.notification, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
                    platform_blocks = EXCLUDED.platform_blocks, body_id = NULL, seq = nextval('queued_message_seq_seq');
              END IF;
              -- The device's node reads its queue (the notice).
              PERFORM pg_notify('ccs_node_' || p.node, token_) FROM device_presence p JOIN cluster_node c ON c.id = p.node
                WHERE p.token = token_ AND p.node <> me AND c.lease_until > ccs_now_ms();
              RETURN;
            END IF;
          END IF;
          IF m_kind IN ('message', 'apns') THEN
            -- An app server's message under an id a node minted: a second message under that id fails
            -- (unique_violation, and its sender gets no ACK) instead of taking the first one's place.
            INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
                enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
              VALUES (dk, m_id, m_sender, m_app_id, m_key, m_priority, m_ttl, m_enqueued, m_expires, m_receipt, m_dwi,
                m_notification, m_kind, m_payload, m_blocks);
          ELSE
            -- The store's own notices (deleted:…, send_error:…): the same fact again, kept once.
            INSERT INTO queued_message(device_key, device_message_id, sender_id, app_message_id, collapse_key, priority, ttl,
                enqueued_at, expires_at, receipt, delay_while_idle, notification, kind, payload, platform_blocks)
              VALUES (dk, m_id, m_sender, m_app_id, m_key, m_priority, m_ttl, m_enqueued, m_expires, m_receipt, m_dwi,
                m_notification, m_kind, m_payload, m_blocks)
              ON CONFLICT(device_key, device_message_id) DO UPDATE SET sender_id = EXCLUDED.sender_id,
                app_message_id = EXCLUDED.app_message_id, collapse_key = EXCLUDED.collapse_key, priority = EXCLUDED.priority,
                ttl = EXCLUDED.ttl, enqueued_at = EXCLUDED.enqueued_at, expires_at = EXCLUDED.expires_at,
                receipt = EXCLUDED.receipt, delay_while_idle = EXCLUDED.delay_while_idle,
                notification = EXCLUDED.notification, kind = EXCLUDED.kind, payload = EXCLUDED.payload,
                platform_blocks = EXCLUDED.platform_blocks, body_id = NULL, seq = nextval('queued_message_seq_seq');
          END IF;
          -- The device's node gets the token, a hint: it reads the queue. Never the message: any role that
          -- may connect could LISTEN to it, and a node must not take a message that any role could NOTIFY.
          PERFORM pg_notify('ccs_node_' || p.node, token_) FROM device_presence p JOIN cluster_node c ON c.id = p.node
            WHERE p.token = token_ AND p.node <> me AND c.lease_until > ccs_now_ms();
          IF limited AND m_key IS NOT NULL THEN
            -- At most max_keys collapse keys: the oldest keys' messages go.
            RETURN QUERY WITH keys AS (
                SELECT q.collapse_key AS k, MIN(q.seq) AS first FROM queued_message q
                WHERE q.device_key = dk AND q.collapse_key IS NOT NULL AND q.kind IN ('message', 'apns')
                GROUP BY q.collapse_key),
              doomed AS (SELECT k FROM keys ORDER BY first DESC OFFSET max_keys),
              gone AS (
                DELETE FROM queued_message q WHERE q.device_key = dk AND q.kind IN ('message', 'apns')
                  AND q.collapse_key IN (SELECT k FROM doomed)
                RETURNING q.device_message_id, q.kind, q.sender_id)
              SELECT g.device_message_id, g.kind, g.sender_id, 'collapsed'::TEXT, false FROM gone g;
          END IF;
        END
        $body$
        """),
    ]

    /// A column of an exported table: its name and whether it holds text (compared byte-wise in an
    /// export's order, as SQLite compares, whatever the database's collation).
    struct Column {
        var name: String
        var isText: Bool
    }

    /// Every exported table's columns in SQLite's order (an export orders rows by them, in turn).
    /// `tray.seq` is not exported: SQLite keeps that order in its rowid, which is not a column either.
    static let exportedColumns: [String: [Column]] = {
        func t(_ n: String) -> Column { Column(name: n, isText: true) }
        func i(_ n: String) -> Column { Column(name: n, isText: false) }
        return [
            "meta": [t("key"), t("value")],
            "sender": [t("sender_id"), t("server_key"), i("created_at")],
            "device": [t("token"), t("device_id"), t("secret"), t("app"), t("platform"), t("senders"), i("created_at"),
                       t("status"), t("state"), t("replaced_by"), t("apns_token"), t("web_subscription"), i("device_key"),
                       t("refreshed_tokens")],
            "message_body": [i("id"), t("payload"), t("platform_blocks"), i("expires_at")],
            "queued_message": [i("seq"), i("device_key"), t("device_message_id"), t("sender_id"), t("app_message_id"),
                               t("collapse_key"), t("priority"), i("ttl"), i("enqueued_at"), i("expires_at"), i("receipt"),
                               i("delay_while_idle"), i("notification"), t("kind"), t("payload"), t("platform_blocks"),
                               i("body_id")],
            "outbound": [i("seq"), t("sender_id"), t("kind"), t("message_id"), t("token"), t("json"), i("created_at"),
                         i("expires_at"), t("about_message_id")],
            "tray": [t("token"), t("device_message_id"), t("payload"), i("shown_at"), t("view")],
            "topic_subscription": [t("sender_id"), t("topic"), i("device_key"), i("added_at")],
            "device_group": [t("id"), t("sender_id"), t("name"), t("members"), i("created_at")],
            "apns_feedback": [t("bundle_id"), t("device_token"), i("timestamp")],
        ]
    }()

    /// The sequences behind generated keys, moved past the largest key after an import.
    static let sequences: [(sequence: String, table: String, column: String)] = [
        ("device_key_seq", "device", "device_key"),
        ("queued_message_seq_seq", "queued_message", "seq"),
        ("outbound_seq_seq", "outbound", "seq"),
        ("tray_seq_seq", "tray", "seq"),
        ("message_body_id_seq", "message_body", "id"),
    ]
}
