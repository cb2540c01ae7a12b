import * as common from '@nestjs/common/constants';
import { RouteParamtypes } from '@nestjs/common/enums/route-paramtypes.enum';
import * as microservices from '@nestjs/microservices/constants';
import { PatternHandler } from '@nestjs/microservices/enums/pattern-handler.enum';
import { GrpcMethodStreamingType } from '@nestjs/microservices';
import {
  RESOLVER_PROPERTY_METADATA,
  RESOLVER_REFERENCE_METADATA,
  RESOLVER_TYPE_METADATA,
} from '@nestjs/graphql/dist/graphql.constants';
import { FileInterceptor } from '@nestjs/platform-express';
import { MULTER_MODULE_OPTIONS } from '@nestjs/platform-express/multer/files.constants';
import { RABBIT_HANDLER } from '@golevelup/nestjs-rabbitmq';
import * as websockets from '@nestjs/websockets/constants';
import { WsParamtype } from '@nestjs/websockets/enums/ws-paramtype.enum';
import * as ours from '../../lib/utils/nest-metadata';

describe("Nest's private metadata keys", () => {
  it.each([
    'INTERCEPTORS_METADATA',
    'PATH_METADATA',
    'HOST_METADATA',
    'METHOD_METADATA',
    'VERSION_METADATA',
    'HTTP_CODE_METADATA',
    'ROUTE_ARGS_METADATA',
    'RESPONSE_PASSTHROUGH_METADATA',
    'SSE_METADATA',
    'RENDER_METADATA',
    'REDIRECT_METADATA',
    'SELF_DECLARED_DEPS_METADATA',
  ] as const)('%s is what @nestjs/common uses', (name) => {
    expect(ours[name]).toBe(common[name]);
  });

  it.each(['PATTERN_METADATA', 'PATTERN_HANDLER_METADATA'] as const)(
    '%s is what @nestjs/microservices uses',
    (name) => {
      expect(ours[name]).toBe(microservices[name]);
    },
  );

  it('RESOLVER_TYPE_METADATA is what @nestjs/graphql uses', () => {
    expect(ours.RESOLVER_TYPE_METADATA).toBe(RESOLVER_TYPE_METADATA);
  });

  it('the field resolver and federation reference keys are what @nestjs/graphql uses', () => {
    expect(ours.RESOLVER_PROPERTY_METADATA).toBe(RESOLVER_PROPERTY_METADATA);
    expect(ours.RESOLVER_REFERENCE_METADATA).toBe(RESOLVER_REFERENCE_METADATA);
  });

  it("a unary gRPC method's streaming type is what the gRPC adapter expects", () => {
    expect(GrpcMethodStreamingType.NO_STREAMING).toBe('no_stream');
  });

  it('EVENT_HANDLER and RESPONSE_PARAM_TYPES match the enums of Nest', () => {
    expect(ours.EVENT_HANDLER).toBe(PatternHandler.EVENT);
    expect(ours.RESPONSE_PARAM_TYPES).toEqual([RouteParamtypes.RESPONSE, RouteParamtypes.NEXT]);
  });

  it("MULTER_MODULE_OPTIONS is the token @nestjs/platform-express's FileInterceptor injects", () => {
    expect(ours.MULTER_MODULE_OPTIONS).toBe(MULTER_MODULE_OPTIONS);
    const deps = Reflect.getMetadata(common.SELF_DECLARED_DEPS_METADATA, FileInterceptor('file'));
    expect(deps).toEqual([expect.objectContaining({ param: MULTER_MODULE_OPTIONS })]);
  });

  it('the gateway keys and the @Ack() parameter type are what @nestjs/websockets uses', () => {
    expect(ours.MESSAGE_MAPPING_METADATA).toBe(websockets.MESSAGE_MAPPING_METADATA);
    expect(ours.WS_ACK_PARAM_TYPE).toBe(WsParamtype.ACK);
  });

  it("golevelup's handler symbol is found by its description", () => {
    expect(RABBIT_HANDLER.description).toBe(ours.RABBIT_HANDLER_DESCRIPTION);
    const handler = () => undefined;
    Reflect.defineMetadata(RABBIT_HANDLER, { type: 'rpc', queue: 'q' }, handler);
    expect(ours.rabbitHandler(handler)).toEqual({ type: 'rpc', queue: 'q' });
    expect(ours.rabbitHandler(() => undefined)).toBeUndefined();
  });
});
