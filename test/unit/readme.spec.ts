import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { IdempotencyErrorCode } from '../../lib';

const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');

describe('README', () => {
  it.each(Object.values(IdempotencyErrorCode))(
    'has the heading that problem details link to for %s',
    (code) => {
      // problemDetails types are `…#<code in lower case>`: the anchor of this heading.
      expect(readme).toMatch(new RegExp(`^#### ${code}$`, 'm'));
    },
  );
});
