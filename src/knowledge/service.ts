/**
 * The knowledge base: workspace documents (text extracted, chunked and indexed at upload, so always
 * `ready`), agent-scoped copies (`adoc_...`) made on attach, and the ranked full-text search that both
 * the API and the agent's `search_knowledge` tool use.
 */
import type { components } from '../../generated/openapi.js';
import { notFound, otherWorkspace, unprocessable } from '../errors/api-error.js';
import { newId } from '../lib/ids.js';
import type { Page, PageParams } from '../lib/pagination.js';
import type { AgentService } from '../agents/service.js';
import { chunkText, DEFAULT_CHUNKING, type ChunkOptions } from './chunk.js';
import { normalise, type DocumentContentType } from './extract.js';
import type { TextExtractor } from './extractor.js';
import type { AgentDocumentRow, DocumentRow, KnowledgeStore } from './store.js';

export type Document = components['schemas']['Document'];
export type AgentDocument = components['schemas']['AgentDocument'];
export type KnowledgeHit = components['schemas']['KnowledgeSearchHit'];

/** Largest upload (file or JSON body), the contract's 10 MB. */
export const MAX_DOCUMENT_BYTES = 10 * 1024 * 1024;
export const MAX_SEARCH_LIMIT = 20;

export type UploadInput = { kind: 'file'; name: string; contentType: DocumentContentType; bytes: Uint8Array } | { kind: 'text'; name: string; text: string };

export function documentNotFound(docId: string) {
  return notFound('document_not_found', `No document ${docId}.`, 'doc_id');
}

export class KnowledgeService {
  constructor(
    private readonly store: KnowledgeStore,
    private readonly agents: AgentService,
    private readonly extractor: Pick<TextExtractor, 'extract'>,
    private readonly chunking: ChunkOptions = DEFAULT_CHUNKING,
  ) {}

  private toDocument(r: DocumentRow): Document {
    return {
      doc_id: r.id,
      name: r.name,
      content_type: r.content_type as Document['content_type'],
      size_bytes: r.size_bytes,
      char_count: r.char_count,
      chunk_count: r.chunk_count,
      status: 'ready',
      created_at: r.created_at.toISOString(),
    };
  }

  private toAgentDocument(r: AgentDocumentRow): AgentDocument {
    return { ...this.toDocument(r), doc_id: r.id, source_doc_id: r.source_doc_id, agent_id: r.agent_id };
  }

  private async owned(workspaceId: string, docId: string): Promise<DocumentRow> {
    const row = await this.store.findDocument(docId);
    if (!row) throw documentNotFound(docId);
    if (row.workspace_id !== workspaceId) throw otherWorkspace('document');
    return row;
  }

  async upload(workspaceId: string, input: UploadInput): Promise<Document> {
    const text = input.kind === 'file' ? await this.extractor.extract(input.contentType, input.bytes) : normalise(input.text);
    if (!text) throw unprocessable('document_empty', 'The document has no text once whitespace is removed.', input.kind === 'file' ? 'file' : 'text');
    const chunks = chunkText(text, this.chunking);
    const row = await this.store.insertDocument(
      {
        id: newId('document'),
        workspace_id: workspaceId,
        name: input.name,
        content_type: input.kind === 'file' ? input.contentType : 'text/plain',
        size_bytes: input.kind === 'file' ? input.bytes.length : Buffer.byteLength(input.text, 'utf8'),
        char_count: [...text].length,
        chunk_count: chunks.length,
      },
      chunks,
    );
    return this.toDocument(row);
  }

  async list(workspaceId: string, params: PageParams): Promise<Page<Document>> {
    const page = await this.store.listDocuments(workspaceId, params);
    return { ...page, data: page.data.map((r) => this.toDocument(r)) };
  }

  async get(workspaceId: string, docId: string): Promise<Document> {
    return this.toDocument(await this.owned(workspaceId, docId));
  }

  async delete(workspaceId: string, docId: string): Promise<{ status: 'deleted'; doc_id: string }> {
    await this.owned(workspaceId, docId);
    await this.store.deleteDocument(workspaceId, docId);
    return { status: 'deleted', doc_id: docId };
  }

  async listForAgent(workspaceId: string, agentId: string, params: PageParams): Promise<Page<AgentDocument>> {
    await this.agents.owned(workspaceId, agentId);
    const page = await this.store.listAgentDocuments(agentId, params);
    return { ...page, data: page.data.map((r) => this.toAgentDocument(r)) };
  }

  /** Puts the document into the draft's knowledge base: a write to the agent (the next version, `If-Match`); answers the agent's ETag too. */
  async attach(workspaceId: string, agentId: string, docId: string, ifMatch?: string): Promise<{ document: AgentDocument; etag: string }> {
    await this.agents.owned(workspaceId, agentId);
    const doc = await this.owned(workspaceId, docId);
    let row: AgentDocumentRow | undefined;
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, async (trx) => {
      row = await this.store.attach(trx, { id: newId('agentDocument'), agent_id: agentId }, doc);
      return true;
    });
    return { document: this.toAgentDocument(row!), etag };
  }

  /** Takes the document out of the draft's knowledge base (the versions that link it keep it): a write to the agent. */
  async detach(
    workspaceId: string,
    agentId: string,
    docId: string,
    ifMatch?: string,
  ): Promise<{ result: { status: 'detached'; doc_id: string }; etag: string }> {
    await this.agents.owned(workspaceId, agentId);
    const row = await this.store.findAgentDocument(agentId, docId);
    if (!row) throw notFound('document_not_found', `No document ${docId} in this agent's knowledge base.`, 'doc_id');
    const etag = await this.agents.changeLinks(workspaceId, agentId, ifMatch, async (trx) => {
      if (!(await this.store.detach(trx, row.id))) throw notFound('document_not_found', `No document ${docId} in this agent's knowledge base.`, 'doc_id');
      return true;
    });
    return { result: { status: 'detached', doc_id: row.id }, etag };
  }

  /** Ranked passages of the draft's documents (the API's search). 422 `empty_query` when the query has no searchable word. */
  async search(workspaceId: string, agentId: string, query: string, limit = 5): Promise<KnowledgeHit[]> {
    await this.agents.owned(workspaceId, agentId);
    return this.searchIn(workspaceId, agentId, 'draft', query, limit);
  }

  /**
   * Ranked passages of the agent's documents among `documentIds` (what the version a conversation runs
   * links; 'draft': the draft's). 422 `empty_query` when the query has no searchable word.
   */
  async searchIn(workspaceId: string, agentId: string, documentIds: readonly string[] | 'draft', query: string, limit = 5): Promise<KnowledgeHit[]> {
    if (!(await this.store.isSearchable(query))) throw unprocessable('empty_query', 'The query has no searchable word.', 'query');
    const n = Math.min(MAX_SEARCH_LIMIT, Math.max(1, Math.floor(limit)));
    return this.store.search(workspaceId, agentId, documentIds, query, n);
  }
}
