-- Export Center: reference MySQL 8 / MariaDB 10.11 DDL.
-- Generated from the Alembic head by scripts/dump_schema.py; do not edit by hand.
-- tests/migrations/test_migrations.py fails when this file and the migrations differ.
-- Identity and key columns compare byte for byte: binary NO PAD collation, which MariaDB
-- names utf8mb4_nopad_bin and MySQL 8 utf8mb4_0900_bin (the migrations pick the right
-- name; on MySQL 8 replace it in this file before running it by hand).

CREATE TABLE IF NOT EXISTS `export_task` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `task_no` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `export_type` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `format` varchar(8) NOT NULL,
  `task_name` varchar(200) NOT NULL,
  `parameters_json` text NOT NULL,
  `parameters_hash` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `request_id` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `app_code` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `requested_by` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `status` varchar(32) NOT NULL,
  `phase` varchar(16) NOT NULL,
  `processed_rows` bigint(20) NOT NULL,
  `total_rows` bigint(20) DEFAULT NULL,
  `dispatch_version` int(11) NOT NULL,
  `attempt_count` int(11) NOT NULL,
  `max_attempts` int(11) NOT NULL,
  `next_retry_at` datetime(3) NOT NULL,
  `lease_owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `lease_until` datetime(3) DEFAULT NULL,
  `last_heartbeat_at` datetime(3) DEFAULT NULL,
  `execution_deadline_at` datetime(3) DEFAULT NULL,
  `cancel_requested` tinyint(1) NOT NULL,
  `failure_code` varchar(64) DEFAULT NULL,
  `failure_message` varchar(1000) DEFAULT NULL,
  `object_key` varchar(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `file_name` varchar(255) DEFAULT NULL,
  `content_type` varchar(128) DEFAULT NULL,
  `size_bytes` bigint(20) DEFAULT NULL,
  `row_count` bigint(20) DEFAULT NULL,
  `trace_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `requested_at` datetime(3) NOT NULL,
  `started_at` datetime(3) DEFAULT NULL,
  `completed_at` datetime(3) DEFAULT NULL,
  `expires_at` datetime(3) DEFAULT NULL,
  `updated_at` datetime(3) NOT NULL,
  `warning_message` varchar(1000) DEFAULT NULL,
  `time_zone` varchar(64) NOT NULL DEFAULT 'UTC',
  `shards_done` int(11) DEFAULT NULL,
  `shards_total` int(11) DEFAULT NULL,
  `lease_recoveries` int(11) NOT NULL DEFAULT 0,
  `file_spec_json` text DEFAULT NULL,
  `manifest_json` mediumtext DEFAULT NULL,
  `schedule_id` bigint(20) DEFAULT NULL,
  `notify_json` text DEFAULT NULL,
  `expiry_notified_at` datetime(3) DEFAULT NULL,
  `row_ceiling` bigint(20) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_task_task_no` (`task_no`),
  UNIQUE KEY `uq_export_task_tenant_id_requested_by_request_id` (`tenant_id`,`requested_by`,`request_id`),
  KEY `ix_export_task_dispatch` (`status`,`next_retry_at`,`id`),
  KEY `ix_export_task_expiry` (`status`,`expires_at`),
  KEY `ix_export_task_lease` (`status`,`lease_until`),
  KEY `ix_export_task_owner` (`tenant_id`,`requested_by`,`id`),
  KEY `ix_export_task_type_status` (`export_type`,`status`),
  KEY `ix_export_task_owner_status` (`tenant_id`,`requested_by`,`status`),
  KEY `ix_export_task_quota_created` (`tenant_id`,`requested_at`),
  KEY `ix_export_task_quota_finished` (`tenant_id`,`completed_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_outbox` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `event_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `task_id` bigint(20) NOT NULL,
  `dispatch_version` int(11) NOT NULL,
  `topic` varchar(128) NOT NULL,
  `tag` varchar(64) NOT NULL,
  `message_key` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `payload_json` text NOT NULL,
  `status` varchar(16) NOT NULL,
  `attempt_count` int(11) NOT NULL,
  `next_retry_at` datetime(3) NOT NULL,
  `lease_owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `lease_until` datetime(3) DEFAULT NULL,
  `sent_at` datetime(3) DEFAULT NULL,
  `last_error` varchar(1000) DEFAULT NULL,
  `created_at` datetime(3) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  `unit` varchar(32) NOT NULL DEFAULT 'task',
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_outbox_event_id` (`event_id`),
  UNIQUE KEY `uq_export_outbox_task_id_dispatch_version_unit` (`task_id`,`dispatch_version`,`unit`),
  KEY `ix_export_outbox_publish` (`status`,`next_retry_at`,`id`),
  KEY `ix_export_outbox_task` (`task_id`,`dispatch_version`,`status`,`sent_at`),
  KEY `ix_export_outbox_sent` (`sent_at`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_task_guard` (
  `id` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_request_key` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `requested_by` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `request_key` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `task_id` bigint(20) NOT NULL,
  `created_at` datetime(3) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_request_key_tenant_id_requested_by_request_key` (`tenant_id`,`requested_by`,`request_key`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_audit` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `occurred_at` datetime(3) NOT NULL,
  `actor` varchar(160) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `action` varchar(32) NOT NULL,
  `outcome` varchar(32) NOT NULL,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `task_id` bigint(20) DEFAULT NULL,
  `task_no` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `event_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `dispatch_version` int(11) DEFAULT NULL,
  `reason` varchar(1000) DEFAULT NULL,
  `details_json` text DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_export_audit_occurred` (`occurred_at`,`id`),
  KEY `ix_export_audit_task` (`task_id`,`id`),
  KEY `ix_export_audit_tenant` (`tenant_id`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_shard` (
  `task_id` bigint(20) NOT NULL,
  `shard_no` int(11) NOT NULL,
  `shard_key` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `window_from` varchar(40) NOT NULL,
  `window_to` varchar(40) NOT NULL,
  `status` varchar(16) NOT NULL,
  `cursor` mediumtext DEFAULT NULL,
  `snapshot_token` mediumtext DEFAULT NULL,
  `rows_written` bigint(20) NOT NULL,
  `pages` int(11) NOT NULL,
  `bytes` bigint(20) NOT NULL,
  `checksum` varchar(8) NOT NULL,
  `segments_json` mediumtext NOT NULL,
  `stats_json` text DEFAULT NULL,
  `dispatch_version` int(11) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  `lease_owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `lease_until` datetime(3) DEFAULT NULL,
  `attempt_count` int(11) NOT NULL DEFAULT 0,
  `failure_code` varchar(64) DEFAULT NULL,
  `failure_message` varchar(1000) DEFAULT NULL,
  PRIMARY KEY (`task_id`,`shard_no`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_schedule` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `app_code` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `name` varchar(200) NOT NULL,
  `export_type` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `export_json` text NOT NULL,
  `cron` varchar(120) NOT NULL,
  `time_zone` varchar(64) NOT NULL,
  `window_json` varchar(200) DEFAULT NULL,
  `start_at` datetime(3) DEFAULT NULL,
  `end_at` datetime(3) DEFAULT NULL,
  `notify_json` text DEFAULT NULL,
  `status` varchar(16) NOT NULL,
  `pause_reason` varchar(1000) DEFAULT NULL,
  `next_fire_at` datetime(3) DEFAULT NULL,
  `lease_owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `lease_until` datetime(3) DEFAULT NULL,
  `version` int(11) NOT NULL,
  `created_at` datetime(3) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  `deleted_at` datetime(3) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_export_schedule_due` (`status`,`next_fire_at`,`id`),
  KEY `ix_export_schedule_owner` (`tenant_id`,`owner`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_schedule_run` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `schedule_id` bigint(20) NOT NULL,
  `fire_time` datetime(3) NOT NULL,
  `fired_at` datetime(3) NOT NULL,
  `fires` int(11) NOT NULL,
  `manual` tinyint(1) NOT NULL,
  `task_id` bigint(20) DEFAULT NULL,
  `outcome` varchar(16) NOT NULL,
  `window_from` varchar(40) DEFAULT NULL,
  `window_to` varchar(40) DEFAULT NULL,
  `failure_code` varchar(64) DEFAULT NULL,
  `message` varchar(1000) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_schedule_run_schedule_id_fire_time` (`schedule_id`,`fire_time`),
  KEY `ix_export_schedule_run_schedule` (`schedule_id`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_principal` (
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `user_id` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `app_code` varchar(32) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `permissions_json` text NOT NULL,
  `email` varchar(320) DEFAULT NULL,
  `language` varchar(16) DEFAULT NULL,
  `notify_defaults_json` text DEFAULT NULL,
  `seen_at` datetime(3) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  PRIMARY KEY (`tenant_id`,`user_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_notification` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `event_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `event_type` varchar(32) NOT NULL,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `user_id` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `task_id` bigint(20) DEFAULT NULL,
  `schedule_id` bigint(20) DEFAULT NULL,
  `channel` varchar(16) NOT NULL,
  `target` varchar(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `payload_json` text NOT NULL,
  `status` varchar(16) NOT NULL,
  `attempt_count` int(11) NOT NULL,
  `next_retry_at` datetime(3) NOT NULL,
  `lease_owner` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `lease_until` datetime(3) DEFAULT NULL,
  `sent_at` datetime(3) DEFAULT NULL,
  `dead_at` datetime(3) DEFAULT NULL,
  `read_at` datetime(3) DEFAULT NULL,
  `last_status_code` int(11) DEFAULT NULL,
  `last_error` varchar(1000) DEFAULT NULL,
  `created_at` datetime(3) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_notification_event_id_channel_target` (`event_id`,`channel`,`target`),
  KEY `ix_export_notification_deliver` (`status`,`next_retry_at`,`id`),
  KEY `ix_export_notification_inbox` (`tenant_id`,`user_id`,`channel`,`id`),
  KEY `ix_export_notification_target` (`channel`,`target`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_delivery_attempt` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `notification_id` bigint(20) NOT NULL,
  `attempt_no` int(11) NOT NULL,
  `attempted_at` datetime(3) NOT NULL,
  `status_code` int(11) DEFAULT NULL,
  `error` varchar(1000) DEFAULT NULL,
  `duration_ms` int(11) DEFAULT NULL,
  `manual` tinyint(1) NOT NULL,
  PRIMARY KEY (`id`),
  KEY `ix_export_delivery_attempt_notification` (`notification_id`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS `export_webhook_endpoint` (
  `id` bigint(20) NOT NULL AUTO_INCREMENT,
  `public_id` varchar(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `tenant_id` varchar(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `url` varchar(2048) NOT NULL,
  `events_json` text NOT NULL,
  `description` varchar(500) DEFAULT NULL,
  `secret` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `previous_secret` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL,
  `previous_secret_until` datetime(3) DEFAULT NULL,
  `enabled` tinyint(1) NOT NULL,
  `created_by` varchar(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin NOT NULL,
  `created_at` datetime(3) NOT NULL,
  `updated_at` datetime(3) NOT NULL,
  `deleted_at` datetime(3) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uq_export_webhook_endpoint_public_id` (`public_id`),
  KEY `ix_export_webhook_endpoint_tenant` (`tenant_id`,`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The single row that task creation locks (every create locks it first).
INSERT IGNORE INTO `export_task_guard` (`id`, `updated_at`) VALUES ('GLOBAL_CREATE', CURRENT_TIMESTAMP(3));
