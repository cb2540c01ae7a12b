// @fastify/static (a dependency of mercurius) requires content-disposition 3, which is ESM-only:
// Node loads it through require(esm), Jest's CommonJS runtime cannot. The suites get the CommonJS
// content-disposition 1 that Express installs, under the name version 3 exports it by.
const contentDisposition = require('../../node_modules/content-disposition/index.js');

module.exports = contentDisposition;
module.exports.create = contentDisposition;
