/**
 * Knowledge documents, agent-scoped copies and their passages. The full-text vector is a generated
 * column (`to_tsvector('simple', text)`, GIN-indexed); searches read only agent-scoped passages.
 */
import type { Knex } from 'knex';
import type { components } from '../../generated/openapi.js';
import { conflict, notFound } from '../errors/api-error.js';
import { isForeignKeyViolation, isUniqueViolation } from '../lib/db-errors.js';
import { paginate, type PageParams } from '../lib/pagination.js';
import { refuseOverLimit } from '../agents/link-limit.js';

export interface DocumentRow {
  id: string;
  workspace_id: string;
  name: string;
  content_type: string;
  size_bytes: number;
  char_count: number;
  chunk_count: number;
  created_at: Date;
}

export interface AgentDocumentRow extends DocumentRow {
  agent_id: string;
  source_doc_id: string | null;
  /** When the draft stopped linking it (migration 048); null: in the draft's knowledge base. Versions may still link it. */
  detached_at: Date | null;
}

/** A passage found by a search, as the contract's KnowledgeSearchHit (the query selects exactly its fields). */
export type SearchRow = components['schemas']['KnowledgeSearchHit'];

const CHUNK_INSERT_BATCH = 500;
/** Most documents in an agent's draft knowledge base (each is copied with its passages). */
export const MAX_AGENT_DOCUMENTS = 200;

export class KnowledgeStore {
  constructor(private readonly db: Knex) {}

  async insertDocument(row: Omit<DocumentRow, 'created_at'>, chunks: string[]): Promise<DocumentRow> {
    return this.db.transaction(async (trx) => {
      const [doc] = await trx('documents').insert(row).returning('*');
      const rows = chunks.map((text, i) => ({ workspace_id: row.workspace_id, document_id: row.id, chunk_index: i, text }));
      for (let i = 0; i < rows.length; i += CHUNK_INSERT_BATCH) await trx('knowledge_chunks').insert(rows.slice(i, i + CHUNK_INSERT_BATCH));
      return doc;
    });
  }

  findDocument(id: string): Promise<DocumentRow | undefined> {
    return this.db('documents').where({ id }).first();
  }

  listDocuments(workspaceId: string, params: PageParams) {
    return paginate<DocumentRow, DocumentRow>(this.db('documents').where({ workspace_id: workspaceId }).select('*'), params, (r) => r);
  }

  /** Agent copies keep their own passages, so they outlive the workspace document (source_doc_id -> null). */
  async deleteDocument(workspaceId: string, id: string): Promise<void> {
    await this.db('documents').where({ id, workspace_id: workspaceId }).delete();
  }

  /**
   * Puts the document into the agent's draft knowledge base, in the agent's write transaction `trx`:
   * its copy detached earlier is taken back (versions may link it: one copy per document and agent),
   * else the document and its passages are copied. 409 `document_already_attached` when it is in
   * the draft's knowledge base already.
   */
  async attach(trx: Knex, copy: { id: string; agent_id: string }, doc: DocumentRow): Promise<AgentDocumentRow> {
    const existing: AgentDocumentRow | undefined = await trx('agent_documents').where({ agent_id: copy.agent_id, source_doc_id: doc.id }).first();
    if (existing && existing.detached_at === null)
      throw conflict('document_already_attached', `Document ${doc.id} is already attached to this agent as ${existing.id}.`, 'doc_id');
    if (existing) {
      const [row] = await trx('agent_documents').where({ id: existing.id }).update({ detached_at: null }).returning('*');
      await refuseOverLimit(trx, 'agent_documents', copy.agent_id, MAX_AGENT_DOCUMENTS, 'documents', 'doc_id');
      return row;
    }
    try {
      const [row] = await trx('agent_documents')
        .insert({
          id: copy.id,
          workspace_id: doc.workspace_id,
          agent_id: copy.agent_id,
          source_doc_id: doc.id,
          name: doc.name,
          content_type: doc.content_type,
          size_bytes: doc.size_bytes,
          char_count: doc.char_count,
          chunk_count: doc.chunk_count,
        })
        .returning('*');
      await trx.raw(
        `insert into knowledge_chunks (workspace_id, agent_document_id, agent_id, chunk_index, text)
         select workspace_id, ?, ?, chunk_index, text from knowledge_chunks where document_id = ?`,
        [copy.id, copy.agent_id, doc.id],
      );
      await refuseOverLimit(trx, 'agent_documents', copy.agent_id, MAX_AGENT_DOCUMENTS, 'documents', 'doc_id');
      return row;
    } catch (err) {
      // The workspace document was deleted since the caller found it.
      if (isForeignKeyViolation(err)) throw notFound('document_not_found', `No document ${doc.id}.`, 'doc_id');
      if (isUniqueViolation(err, 'agent_documents_agent_source'))
        throw conflict('document_already_attached', `Document ${doc.id} is already attached to this agent.`, 'doc_id');
      throw err;
    }
  }

  /** The draft's documents (detached ones are the versions' only). */
  listAgentDocuments(agentId: string, params: PageParams) {
    return paginate<AgentDocumentRow, AgentDocumentRow>(
      this.db('agent_documents').where({ agent_id: agentId }).whereNull('detached_at').select('*'),
      params,
      (r) => r,
    );
  }

  /** The draft's copy named by its own id (`adoc_`) or by its workspace document's id (`doc_`). */
  findAgentDocument(agentId: string, id: string): Promise<AgentDocumentRow | undefined> {
    return this.db('agent_documents')
      .where({ agent_id: agentId })
      .whereNull('detached_at')
      .andWhere((q) => q.where({ id }).orWhere({ source_doc_id: id }))
      .first();
  }

  /** Takes the copy out of the draft's knowledge base (kept for the versions); false when it was out already. */
  async detach(trx: Knex, id: string): Promise<boolean> {
    return (await trx('agent_documents').where({ id }).whereNull('detached_at').update({ detached_at: trx.fn.now() })) > 0;
  }

  /** Whether the query has at least one searchable word under the `simple` configuration. */
  async isSearchable(query: string): Promise<boolean> {
    const { rows } = await this.db.raw<{ rows: Array<{ n: number }> }>(`select numnode(websearch_to_tsquery('simple', ?)) as n`, [query]);
    return rows[0].n > 0;
  }

  /**
   * Ranked passages of the agent's copies among `documentIds` (the draft's documents, or those a
   * version links), best first.
   */
  async search(workspaceId: string, agentId: string, documentIds: readonly string[] | 'draft', query: string, limit: number): Promise<SearchRow[]> {
    const ids = documentIds === 'draft' ? null : [...documentIds];
    if (ids?.length === 0) return [];
    const { rows } = await this.db.raw<{ rows: SearchRow[] }>(
      `select d.id as doc_id, d.source_doc_id, d.name, h.chunk_index, h.text, h.score
         from (select c.agent_document_id, c.chunk_index, c.text, ts_rank_cd(c.tsv, q) as score
                 from knowledge_chunks c, websearch_to_tsquery('simple', ?) q
                where c.agent_id = ? and c.workspace_id = ? and c.tsv @@ q) h
         join agent_documents d on d.id = h.agent_document_id
        where h.score > 0
          and (case when ?::text[] is null then d.detached_at is null else d.id = any(?::text[]) end)
        order by h.score desc, d.id desc, h.chunk_index
        limit ?`,
      [query, agentId, workspaceId, ids, ids, limit],
    );
    return rows.map((r) => ({ ...r, score: Number(r.score) }));
  }
}
