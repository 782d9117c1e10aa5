/** Key records on PostgreSQL: a key's first answer for KEY_RETENTION_DAYS (docs/operations.md#key-records). */
export * from './pruner';
export * from './repository';
