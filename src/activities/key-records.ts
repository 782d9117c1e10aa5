/** The activity a payment hands its keys' first terminal answers to (docs/operations.md#key-records). */
import type { KeyAnswer } from '../domain/key-records';
import type { KeyRecords } from '../key-records';

/** Builds it over the key-record table; without one (no `DATABASE_URL`) it answers `disabled` and keeps nothing. */
export function createKeyRecordActivities(records: KeyRecords | undefined) {
  return {
    /** Records a key's first terminal answer; the first wins (a retry, or a later answer of the key, changes nothing). */
    async recordKeyAnswer(answer: KeyAnswer): Promise<'recorded' | 'disabled'> {
      if (records === undefined) return 'disabled';
      await records.record(answer);
      return 'recorded';
    },
  };
}

export type KeyRecordActivities = ReturnType<typeof createKeyRecordActivities>;
