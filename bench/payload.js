// Response bodies shared by both apps under test (plain JS, no dependencies, so bench/peer can
// load it too). `payment(amount)` is the ~200 B JSON of every throughput scenario; `orders(size)`
// is a realistic list of orders of about `size` bytes of JSON (varied ids, amounts, dates and
// addresses from a seeded generator, so compression sees real-world entropy, not one repeated
// character), built once per size.

/** Same seed, same bytes: results stay comparable across runs. */
function random(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const FIRST = [
  'Anna',
  'Ben',
  'Chloé',
  'Dmitri',
  'Emma',
  'Farid',
  'Grace',
  'Hugo',
  'Ines',
  'Jonas',
  'Kenji',
  'Lea',
  'Mateo',
  'Nora',
  'Omar',
  'Paula',
  'Quentin',
  'Rosa',
  'Sven',
  'Tariq',
];
const LAST = [
  'Müller',
  'Smith',
  'Rossi',
  'Dubois',
  'García',
  'Nowak',
  'Jensen',
  'Silva',
  'Kowalski',
  'Novak',
  'Bauer',
  'Fischer',
  'Moreau',
  'Costa',
  'Berg',
  'Lindqvist',
];
const CITIES = [
  ['Berlin', 'DE'],
  ['Hamburg', 'DE'],
  ['München', 'DE'],
  ['Paris', 'FR'],
  ['Lyon', 'FR'],
  ['Madrid', 'ES'],
  ['Barcelona', 'ES'],
  ['Milano', 'IT'],
  ['Roma', 'IT'],
  ['Amsterdam', 'NL'],
  ['Rotterdam', 'NL'],
  ['Wien', 'AT'],
  ['Zürich', 'CH'],
  ['Warszawa', 'PL'],
  ['Praha', 'CZ'],
  ['København', 'DK'],
  ['Stockholm', 'SE'],
  ['Lisboa', 'PT'],
  ['Dublin', 'IE'],
  ['Bruxelles', 'BE'],
];
const STREETS = [
  'Hauptstraße',
  'Rue de la Paix',
  'Calle Mayor',
  'Via Roma',
  'Kerkstraat',
  'Market St',
  'Bahnhofstraße',
  'Rue Victor Hugo',
  'Gran Vía',
  'Lange Nieuwstraat',
];
const PRODUCTS = [
  'USB-C cable 2 m',
  'Wireless mouse',
  'Mechanical keyboard',
  'Laptop stand',
  '27" monitor',
  'Noise-cancelling headphones',
  'Webcam 1080p',
  'Desk lamp',
  'Office chair',
  'Notebook A5',
  'Fountain pen',
  'Coffee beans 1 kg',
  'Water bottle',
  'Backpack 20 l',
  'Phone case',
  'Screen protector',
  'Power bank 10 000 mAh',
  'HDMI adapter',
  'SSD 1 TB',
  'Ergonomic mouse pad',
];
const STATUSES = ['paid', 'paid', 'paid', 'pending', 'shipped', 'shipped', 'delivered', 'refunded'];
const CURRENCIES = ['EUR', 'EUR', 'EUR', 'USD', 'GBP', 'CHF'];
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

function order(next, index, time) {
  const pick = (list) => list[Math.floor(next() * list.length)];
  const id = (prefix, length) =>
    prefix + Array.from({ length }, () => ALPHABET[Math.floor(next() * 32)]).join('');
  const [first, last] = [pick(FIRST), pick(LAST)];
  const [city, country] = pick(CITIES);
  const items = Array.from({ length: 1 + Math.floor(next() * 4) }, () => {
    const product = Math.floor(next() * PRODUCTS.length);
    return {
      sku: `SKU-${String(10000 + product * 37).padStart(5, '0')}`,
      name: PRODUCTS[product],
      quantity: 1 + Math.floor(next() * 4),
      unitPrice: 199 + Math.floor(next() * 49800),
    };
  });
  return {
    id: id('ord_', 16),
    number: 100000 + index,
    status: pick(STATUSES),
    currency: pick(CURRENCIES),
    total: items.reduce((sum, item) => sum + item.quantity * item.unitPrice, 0),
    createdAt: new Date(time).toISOString(),
    customer: {
      id: id('cus_', 12),
      name: `${first} ${last}`,
      email: `${first}.${last}${Math.floor(next() * 1000)}@example.com`
        .normalize('NFD')
        .replace(/[^\x20-\x7e]/g, '')
        .toLowerCase(),
    },
    shipping: {
      line1: `${pick(STREETS)} ${1 + Math.floor(next() * 180)}`,
      postcode: String(Math.floor(next() * 90000) + 10000),
      city,
      country,
    },
    items,
  };
}

const cache = new Map();
/** About `size` bytes of JSON: `{ orders: [...] }`, cut at the first order that reaches it. */
function orders(size) {
  if (!cache.has(size)) {
    const next = random(size);
    const list = [];
    let time = Date.UTC(2025, 10, 3, 8, 0, 0);
    let bytes = 12;
    while (bytes < size) {
      time += Math.floor(next() * 600_000);
      const item = order(next, list.length, time);
      bytes += JSON.stringify(item).length + 1;
      list.push(item);
    }
    cache.set(size, { orders: list, count: list.length });
  }
  return cache.get(size);
}

/** The ~200 B JSON body of the throughput scenarios. */
const payment = (amount = 100) => ({
  id: 'pay_01HZX5K8G7Q2M4T6V8W0Y2A4C6',
  object: 'payment',
  status: 'succeeded',
  amount,
  currency: 'EUR',
  created: 1763800000,
  customer: 'cus_9KQ2M4T6V8W0',
  description: 'Order #1234 from the benchmark',
});

module.exports = { orders, payment };
