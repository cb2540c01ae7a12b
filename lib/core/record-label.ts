import type { RecordAbout } from '../stores/record-listing';
import type { RecordCipher } from '../utils/encryption';

/** What a label holds: the client's key as sent, and the record's owner as its scope names it. */
export interface LabelContents {
  /** The client's key, as the route parsed it (or as `run()` took it). */
  key: string;
  /**
   * The owner, as `recordScope` wrote it after the route: `t:<tenant id>`, `u:<principal id>`,
   * `''` for none, or `?<scope>` for a scope of another shape (an interceptor subclass's).
   */
  owner: string;
}

/** What a claim's label is built from (see `Claim`). */
export interface LabelSource {
  /** The store key, which a sealed label is bound to. */
  key: string;
  /** The route's identity, as events name it. */
  route: string;
  /** The scope the key was hashed with: the route, then the owner. */
  scope?: string;
  /** The client's key as sent. */
  clientKey?: string;
}

/** What a sealed label's ciphertext is bound to beside its record key: never a response's. */
const LABEL_CONTEXT = '\0label';
const EMPTY = Buffer.alloc(0);
/** A key id as `RecordCipher` names its keys: 8 hex digits. */
const ID = /^[0-9a-f]{8}$/;

/**
 * The labels records are listed by (`ClaimRequest.about.label`): the client's key and the owner,
 * which store keys only hold hashed. One home for their format:
 * - `p<n>:<owner><key>`, `<n>` the owner's length: plain, when the text holds no NUL and is
 *   well-formed Unicode (what a text column of PostgreSQL or MySQL takes);
 * - `j["<owner>","<key>"]` otherwise (a `run()` key or a tenant id may hold anything);
 * - `s<key id>.<base64url>` sealed with `encryption` (AES-256-GCM, as stored responses are, and
 *   bound to the record key: a label copied to another record does not open).
 *
 * Built once per claim, by string concatenation (and one seal with `encryption`): no JSON on
 * the common path.
 */
export class RecordLabels {
  /** The sealing key's id, learnt from the first seal. */
  private sealedWith?: string;

  constructor(private readonly cipher?: RecordCipher) {}

  /** What a claim carries for listing; undefined when the entry point gave no client key. */
  about(claim: LabelSource): RecordAbout | undefined {
    const { route, scope = route, clientKey } = claim;
    if (clientKey === undefined) return undefined;
    const owner =
      scope === route
        ? ''
        : scope.startsWith(route) && scope.charCodeAt(route.length) === 0
          ? scope.slice(route.length + 1)
          : `?${scope}`;
    const text = `${owner.length}:${owner}${clientKey}`;
    const plain =
      !text.includes('\0') && (text as string & { isWellFormed(): boolean }).isWellFormed()
        ? `p${text}`
        : `j${JSON.stringify([owner, clientKey])}`;
    return { route, label: this.cipher ? this.seal(plain, claim.key) : plain };
  }

  /**
   * What a label holds, or undefined when it does not open: sealed with a key not in
   * `encryption.keys` (or with `encryption` off), bound to another record, or not a label.
   * Never throws.
   */
  open(label: unknown, recordKey: string): LabelContents | undefined {
    if (typeof label !== 'string') return undefined;
    try {
      return this.read(label.startsWith('s') ? this.unseal(label, recordKey) : label);
    } catch {
      return undefined;
    }
  }

  private seal(plain: string, recordKey: string): string {
    const sealed = this.cipher!.seal(plain, EMPTY, {}, recordKey + LABEL_CONTEXT);
    this.sealedWith ??= (JSON.parse(sealed.meta) as { x: string }).x;
    return `s${this.sealedWith}.${sealed.body.toString('base64url')}`;
  }

  private unseal(label: string, recordKey: string): string | undefined {
    const dot = label.indexOf('.');
    const id = label.slice(1, dot);
    if (!this.cipher || !ID.test(id)) return undefined;
    const body = Buffer.from(label.slice(dot + 1), 'base64url');
    // The public meta a seal with no public fields writes: the key id alone.
    const outer = JSON.stringify({ x: id });
    return this.cipher.open(outer, id, body, recordKey + LABEL_CONTEXT).meta;
  }

  private read(text: string | undefined): LabelContents | undefined {
    if (text?.startsWith('p')) {
      const colon = text.indexOf(':');
      const length = Number(text.slice(1, colon));
      if (colon < 2 || !Number.isSafeInteger(length) || colon + 1 + length > text.length) {
        return undefined;
      }
      const owner = text.slice(colon + 1, colon + 1 + length);
      return { owner, key: text.slice(colon + 1 + length) };
    }
    if (!text?.startsWith('j')) return undefined;
    const pair: unknown = JSON.parse(text.slice(1));
    if (!Array.isArray(pair) || pair.length !== 2) return undefined;
    const [owner, key] = pair as unknown[];
    return typeof owner === 'string' && typeof key === 'string' ? { owner, key } : undefined;
  }
}

/**
 * The owner of a label as `IdempotencyRecords` reports it: `tenant` (a `scope` function's
 * tenant), or `user: { id }` (the principal), each as the text of its id (`42` for `{ id: 42 }`):
 * a query rebuilt from them finds the record when the id was a string (under `id`, for a
 * principal). Nothing for a record without an owner, or a scope of another shape.
 */
export function labelOwner(owner: string): { tenant?: string; user?: { id: string } } {
  const kind = owner.slice(0, 2);
  if (kind !== 't:' && kind !== 'u:') return {};
  // `<field>=` (an object's id field; empty for a principal that is an id itself), then the
  // type tag (`s:`, `n:`, `i:`, `x:`, `o:`): see principalId() and tenantId().
  const id = owner
    .slice(2)
    .replace(/^[A-Za-z_]*=/, '')
    .replace(/^[a-z]:/, '');
  return kind === 't:' ? { tenant: id } : { user: { id } };
}
